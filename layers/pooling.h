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
  MaxPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: MaxPool2d(2) reads well
  TAPEGRAD_ARG(Size2, kernel_size);
  TAPEGRAD_ARG(std::optional<Size2>, stride);
  TAPEGRAD_ARG(Size2, padding, 0);
  TAPEGRAD_ARG(Size2, dilation, 1);
  TAPEGRAD_ARG(bool, ceil_mode, false);
};

/// AvgPool2d's arguments (layers/options.h): AvgPool2dOptions(kernel_size) with stride
/// kernel_size (nullopt), padding 0, ceil_mode false, count_include_pad true.
class AvgPool2dOptions {
 public:
  AvgPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  TAPEGRAD_ARG(Size2, kernel_size);
  TAPEGRAD_ARG(std::optional<Size2>, stride);
  TAPEGRAD_ARG(Size2, padding, 0);
  TAPEGRAD_ARG(bool, ceil_mode, false);
  TAPEGRAD_ARG(bool, count_include_pad, true);
};

/// AdaptiveAvgPool2d's argument (layers/options.h): AdaptiveAvgPool2dOptions(output_size).
class AdaptiveAvgPool2dOptions {
 public:
  AdaptiveAvgPool2dOptions(Size2 output_size) : output_size_(output_size) {}  // NOLINT
  TAPEGRAD_ARG(Size2, output_size);
};

/// Max over kernel_size windows (stride defaults to kernel_size), -inf padding, dilation,
/// ceil_mode. (N, C, H, W) -> (N, C, H_out, W_out).
/// Throws std::invalid_argument for kernel/stride/dilation < 1 or padding outside
/// [0, kernel/2] (naming the value); forward throws as functional::max_pool2d.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     Size2 dilation = 1, bool ceil_mode = false);
  /// From options: MaxPool2d(MaxPool2dOptions(3).stride(2).padding(1)).
  explicit MaxPool2d(const MaxPool2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

/// Mean over kernel_size windows (stride defaults to kernel_size); count_include_pad
/// (default true) counts the zero padding in the divisor.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true);
  /// From options: AvgPool2d(AvgPool2dOptions(2).count_include_pad(false)).
  explicit AvgPool2d(const AvgPool2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;

  Size2 kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

/// Mean over adaptive windows giving exactly output_size; (1, 1) is global average pooling.
/// Throws std::invalid_argument for an output size < 1.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  explicit AdaptiveAvgPool2d(const AdaptiveAvgPool2dOptions& options) : AdaptiveAvgPool2d(options.output_size()) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + output_size.str(); }

  Size2 output_size;
};

}  // namespace tapegrad::layers
