#pragma once
// Pooling modules, PyTorch's nn.MaxPool2d, nn.AvgPool2d and nn.AdaptiveAvgPool2d.
// No parameters or buffers; train and eval mode agree. Semantics, output sizes and
// errors: layers/functional/pooling.h.
#include <optional>

#include <tapegrad/layers/functional/pooling.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

using functional::Size2;

/// Max over kernel_size windows (stride defaults to kernel_size), -inf padding, dilation,
/// ceil_mode. (N, C, H, W) -> (N, C, H_out, W_out).
/// Throws std::invalid_argument for kernel/stride/dilation < 1 or padding outside
/// [0, kernel/2] (naming the value); forward throws as functional::max_pool2d.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     Size2 dilation = 1, bool ceil_mode = false);
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
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + output_size.str(); }

  Size2 output_size;
};

}  // namespace tapegrad::layers
