#pragma once
// The geometry of 2-D sliding windows, one home for conv2d and every pool: the (h, w) size
// pair, the output size of a dimension, and the checks a window op makes before it touches
// memory (argument ranges, the 2^62 extent limit, a max-pool window with no tap inside the
// input).
#include <cstdint>
#include <string>

#include <tapegrad/core/shape.h>

namespace tapegrad::layers::functional {

/// An (h, w) pair of sizes; an int converts to (v, v), like PyTorch's int-or-tuple args.
struct Size2 {
  ///@{
  /// Height and width sizes (default 0).
  std::int64_t h = 0, w = 0;
  ///@}
  Size2() = default;
  /// (v, v): what an int argument means.
  Size2(std::int64_t v) : h(v), w(v) {}  // NOLINT: implicit on purpose (int or pair)
  /// (h_, w_).
  Size2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  /// Both sizes equal.
  bool operator==(const Size2&) const = default;
  std::string str() const;  ///< "(h, w)"
};

/// A window op's geometry: taps i·stride − padding + t·dilation, t in [0, kernel), per dim.
struct WindowGeometry {
  ///@{
  /// Kernel size, stride, padding and dilation (default 1), (h, w) each.
  Size2 kernel_size, stride, padding, dilation = 1;
  ///@}
};

/// Output size of one spatial dim of a convolution:
/// floor((in + 2·pad − dilation·(kernel − 1) − 1) / stride) + 1, computed in 128 bits.
/// Throws std::invalid_argument naming the values for stride < 1 or a result outside int64.
std::int64_t conv_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation);

/// PyTorch's pooling output size for one dim:
///   out = floor_or_ceil((in + 2·pad − dilation·(kernel − 1) − 1) / stride) + 1,
/// and with ceil_mode the last window must start inside the input or the left padding:
/// if (out − 1)·stride >= in + pad then out −= 1.
std::int64_t pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation, bool ceil_mode);

/// Which padding a window op accepts: any padding >= 0 (conv2d: zeros padding), or, for the
/// pools, 0 <= padding <= kernel_size/2 (PyTorch's limit).
enum class PaddingLimit { NonNegative, HalfKernel };

/// Throws std::invalid_argument "<op>: expected kernel_size >= 1, got (h, w)" (and likewise
/// for stride >= 1, dilation >= 1, and the padding limit), naming the value.
void check_window_args(const std::string& op, const WindowGeometry& g, PaddingLimit limit);

/// Throws std::invalid_argument naming the input shape and every argument unless, in each
/// spatial dim of `input` (N, C, H, W), the padded input size in + 2·pad, the dilated kernel
/// size dilation·(kernel − 1) + 1 and the stride are below 2^62, so that the window
/// arithmetic (sums of two such sizes) cannot overflow int64. Call after check_window_args.
void check_window_extent(const std::string& op, const Shape& input, const WindowGeometry& g);

/// Throws std::invalid_argument when an output position of a window op that only reads
/// inside the input (max pooling: padding is ignored, never 0) would have no tap inside the
/// input: every tap i·stride − padding + t·dilation of its window lies in the padding. The
/// message names kernel_size, stride, padding, dilation, ceil_mode, the input shape and the
/// first such output row or column. out_h, out_w: the op's output size (>= 1). With
/// padding <= kernel_size/2 only windows that start in the left padding can miss the input
/// (the check walks those, at most out_h + out_w positions).
void check_window_taps(const std::string& op, const Shape& input, const WindowGeometry& g, bool ceil_mode,
                       std::int64_t out_h, std::int64_t out_w);

}  // namespace tapegrad::layers::functional
