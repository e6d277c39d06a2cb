#pragma once
// Pooling modules, PyTorch's nn.MaxPool2d, nn.AvgPool2d and nn.AdaptiveAvgPool2d.
// No parameters or buffers; train and eval mode agree. Semantics, output sizes and
// errors: layers/functional/pooling.h.
#include <optional>

#include <tapegrad/layers/functional/pooling.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

using functional::Size2;

/// MaxPool2d's arguments (layers/options.h): MaxPool2dOptions(kernel_size) with stride
/// kernel_size (nullopt), padding 0, dilation 1, ceil_mode false.
class MaxPool2dOptions {
 public:
  /// Options with the required window size (an int n means (n, n)); the rest default.
  MaxPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: MaxPool2d(2) reads well
  /// Window size (kH, kW), >= 1.
  TAPEGRAD_ARG(Size2, kernel_size);
  /// Step between windows, >= 1; nullopt (default): kernel_size.
  TAPEGRAD_ARG(std::optional<Size2>, stride);
  /// Implicit -inf padding on each side, in [0, kernel/2]; default 0.
  TAPEGRAD_ARG(Size2, padding, 0);
  /// Spacing between window taps, >= 1; default 1.
  TAPEGRAD_ARG(Size2, dilation, 1);
  /// true: ceil instead of floor in the output size (windows starting in the padding are
  /// dropped, as in PyTorch); default false.
  TAPEGRAD_ARG(bool, ceil_mode, false);
};

/// AvgPool2d's arguments (layers/options.h): AvgPool2dOptions(kernel_size) with stride
/// kernel_size (nullopt), padding 0, ceil_mode false, count_include_pad true.
class AvgPool2dOptions {
 public:
  /// Options with the required window size (an int n means (n, n)); the rest default.
  AvgPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  /// Window size (kH, kW), >= 1.
  TAPEGRAD_ARG(Size2, kernel_size);
  /// Step between windows, >= 1; nullopt (default): kernel_size.
  TAPEGRAD_ARG(std::optional<Size2>, stride);
  /// Implicit zero padding on each side, in [0, kernel/2]; default 0.
  TAPEGRAD_ARG(Size2, padding, 0);
  /// true: ceil instead of floor in the output size; default false.
  TAPEGRAD_ARG(bool, ceil_mode, false);
  /// true (default): the padding counts in the divisor; false: only input positions do.
  TAPEGRAD_ARG(bool, count_include_pad, true);
};

/// AdaptiveAvgPool2d's argument (layers/options.h): AdaptiveAvgPool2dOptions(output_size).
class AdaptiveAvgPool2dOptions {
 public:
  /// Options with the required output size (OH, OW) (an int n means (n, n)).
  AdaptiveAvgPool2dOptions(Size2 output_size) : output_size_(output_size) {}  // NOLINT
  /// Output size (OH, OW), >= 1.
  TAPEGRAD_ARG(Size2, output_size);
};

/// Max over kernel_size windows (stride defaults to kernel_size), -inf padding, dilation,
/// ceil_mode. (N, C, H, W) -> (N, C, H_out, W_out).
/// Throws std::invalid_argument for kernel/stride/dilation < 1 or padding outside
/// [0, kernel/2] (naming the value); forward throws as functional::max_pool2d.
class MaxPool2d : public Module {
 public:
  /// Positional form of MaxPool2dOptions (same defaults); checks the geometry as the class
  /// description says.
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     Size2 dilation = 1, bool ceil_mode = false);
  /// From options: MaxPool2d(MaxPool2dOptions(3).stride(2).padding(1)).
  explicit MaxPool2d(const MaxPool2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

  ///@{
  /// The geometry as constructed, (h, w) each: stride is kernel_size when not given.
  Size2 kernel_size, stride, padding, dilation;
  ///@}
  /// true: output size rounds up (see MaxPool2dOptions::ceil_mode).
  bool ceil_mode;
};

/// Mean over kernel_size windows (stride defaults to kernel_size); count_include_pad
/// (default true) counts the zero padding in the divisor.
class AvgPool2d : public Module {
 public:
  /// Positional form of AvgPool2dOptions (same defaults). Throws std::invalid_argument for
  /// kernel/stride < 1 or padding outside [0, kernel/2], naming the value.
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true);
  /// From options: AvgPool2d(AvgPool2dOptions(2).count_include_pad(false)).
  explicit AvgPool2d(const AvgPool2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;

  ///@{
  /// The geometry as constructed, (h, w) each: stride is kernel_size when not given.
  Size2 kernel_size, stride, padding;
  ///@}
  ///@{
  /// The rounding and divisor flags (see AvgPool2dOptions).
  bool ceil_mode, count_include_pad;
  ///@}
};

/// Mean over adaptive windows giving exactly output_size; (1, 1) is global average pooling.
/// Throws std::invalid_argument for an output size < 1.
class AdaptiveAvgPool2d : public Module {
 public:
  /// Pools to `output_size` (OH, OW); throws std::invalid_argument for a size < 1.
  explicit AdaptiveAvgPool2d(Size2 output_size);
  /// From options: AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions(1)); same check.
  explicit AdaptiveAvgPool2d(const AdaptiveAvgPool2dOptions& options) : AdaptiveAvgPool2d(options.output_size()) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + output_size.str(); }

  /// The output size (OH, OW).
  Size2 output_size;
};

}  // namespace tapegrad::layers
