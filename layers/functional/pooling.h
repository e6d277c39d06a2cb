#pragma once
// Functional 2-D pooling with PyTorch's semantics (F.max_pool2d, F.avg_pool2d,
// F.adaptive_avg_pool2d). Inputs are (N, C, H, W); every (n, c) plane is pooled alone.
// Each differentiates to any order: under create_graph its backward is a recorded op
// (pool_grad_ops.h: the scatter at the argmax, or the spread over the windows) whose own
// backward is the gather or the pool itself. The first-order backward is unchanged.
#include <cstdint>
#include <optional>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/window.h>  // Size2, pool_output_size, the window checks

namespace tapegrad::layers::functional {

/// Max over each window (positions outside the input are ignored, never 0). A NaN in a
/// window wins (the output is NaN and its gradient goes to the last NaN, as PyTorch's CPU
/// kernel). Ties keep the first maximum. Backward routes dy to the argmax.
/// stride defaults to kernel_size. Output size: pool_output_size (window.h). Throws
/// std::invalid_argument naming the values for a rank other than 4, H or W = 0 (as PyTorch;
/// N = 0 or C = 0 give an empty output), kernel/stride/dilation
/// < 1, padding < 0 or > kernel/2, an output size < 1, or a window whose taps all lie in
/// the padding (dilation >= the input size can leave a window with nothing to take the
/// maximum of; PyTorch returns -inf there, tapegrad refuses: check_window_taps).
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);

/// Mean over each window. The divisor is the window's size clipped to the padded input
/// (count_include_pad = true, the default) or to the input itself (false); windows that
/// ceil_mode adds past the padding are clipped in both cases. divisor_override, when given,
/// is every window's divisor instead (the sum over the window / divisor_override). Same errors
/// as max_pool2d (with padding <= kernel/2 and no dilation every window overlaps the input),
/// and std::invalid_argument for divisor_override = 0.
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = std::nullopt);

/// Mean over the window [floor(i·H/OH), ceil((i+1)·H/OH)) × [floor(j·W/OW), ceil((j+1)·W/OW)).
/// (N, C, H, W) -> (N, C, OH, OW). Throws for a rank other than 4, H or W = 0, or output sizes < 1.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);

}  // namespace tapegrad::layers::functional
