#pragma once
// Functional 2-D pooling with PyTorch's semantics (F.max_pool2d, F.avg_pool2d,
// F.adaptive_avg_pool2d). Inputs are (N, C, H, W); every (n, c) plane is pooled alone.
#include <optional>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/conv.h>

namespace tapegrad::layers::functional {

/// PyTorch's pooling output size for one dim:
///   out = floor_or_ceil((in + 2·pad − dilation·(kernel − 1) − 1) / stride) + 1,
/// and with ceil_mode the last window must start inside the input or the left padding:
/// if (out − 1)·stride >= in + pad then out −= 1.
std::int64_t pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation, bool ceil_mode);

/// Max over each window (positions outside the input are ignored, never 0). A NaN in a
/// window wins (the output is NaN and its gradient goes to the last NaN, as PyTorch's CPU
/// kernel). Ties keep the first maximum. Backward routes dy to the argmax.
/// stride defaults to kernel_size. Throws std::invalid_argument naming the values for a
/// rank other than 4, kernel/stride/dilation < 1, padding < 0 or > kernel/2, or an output
/// size < 1.
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);

/// Mean over each window. The divisor is the window's size clipped to the padded input
/// (count_include_pad = true, the default) or to the input itself (false); windows that
/// ceil_mode adds past the padding are clipped in both cases. Same errors as max_pool2d.
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);

/// Mean over the window [floor(i·H/OH), ceil((i+1)·H/OH)) × [floor(j·W/OW), ceil((j+1)·W/OW)).
/// (N, C, H, W) -> (N, C, OH, OW). Throws for a rank other than 4 or output sizes < 1.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);

}  // namespace tapegrad::layers::functional
