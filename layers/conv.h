#pragma once
// Conv2d, PyTorch's nn.Conv2d (padding_mode "zeros").
#include <tapegrad/core/random.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

using functional::Size2;

/// Conv2d's arguments (layers/options.h): Conv2dOptions(in_channels, out_channels,
/// kernel_size) with stride 1, padding 0, dilation 1, groups 1, bias true, float32.
class Conv2dOptions {
 public:
  /// Options with the required channel counts and window size (an int n means (n, n)).
  Conv2dOptions(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  /// Input channels C_in, >= 1.
  TAPEGRAD_ARG(std::int64_t, in_channels);
  /// Output channels C_out, >= 1.
  TAPEGRAD_ARG(std::int64_t, out_channels);
  /// Kernel size (kH, kW), >= 1.
  TAPEGRAD_ARG(Size2, kernel_size);
  /// Step between windows, >= 1; default 1.
  TAPEGRAD_ARG(Size2, stride, 1);
  /// Zero padding on each side, >= 0; default 0.
  TAPEGRAD_ARG(Size2, padding, 0);
  /// Spacing between kernel taps, >= 1; default 1.
  TAPEGRAD_ARG(Size2, dilation, 1);
  /// Channel groups, >= 1, dividing both channel counts; default 1.
  TAPEGRAD_ARG(std::int64_t, groups, 1);
  /// Whether to add a learnable bias (out_channels); default true.
  TAPEGRAD_ARG(bool, bias, true);
  /// dtype of weight and bias; default float32.
  TAPEGRAD_ARG(Dtype, dtype, Dtype::Float32);
};

/// 2-D convolution (cross-correlation) of (N, in_channels, H, W) into
/// (N, out_channels, H_out, W_out), H_out = floor((H + 2·padding − dilation·(kernel − 1) − 1)/stride) + 1.
/// kernel_size, stride, padding, dilation: an int or an (h, w) pair; groups splits the
/// channels into independent groups (groups = in_channels = out_channels: depthwise).
/// Parameters (PyTorch names): weight (out_channels, in_channels/groups, kH, kW),
/// bias (out_channels) when bias = true. Init as PyTorch: weight kaiming-uniform with
/// a = sqrt(5) (bound 1/sqrt(fan_in), fan_in = in_channels/groups·kH·kW), bias U(±1/sqrt(fan_in)),
/// drawn from `gen`.
/// Throws std::invalid_argument naming the values for channels < 1, kernel/stride/dilation/groups < 1,
/// padding < 0, or groups not dividing both channel counts; forward throws for a wrong
/// channel count, a rank other than 4 or a kernel larger than the padded input (see functional::conv2d).
class Conv2d : public Module {
 public:
  /// Positional form of Conv2dOptions (same defaults); initialises weight and bias from
  /// `gen` as the class description says, and throws as it says.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
         Size2 dilation = 1, std::int64_t groups = 1, bool bias = true, Dtype dtype = Dtype::Float32,
         Generator& gen = default_generator());
  /// The same from options: Conv2d(Conv2dOptions(1, 8, 3).padding(1), gen).
  explicit Conv2d(const Conv2dOptions& options, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;

  ///@{
  /// Channel counts as constructed.
  std::int64_t in_channels, out_channels;
  ///@}
  ///@{
  /// Geometry as constructed, (h, w) each.
  Size2 kernel_size, stride, padding, dilation;
  ///@}
  /// Channel groups.
  std::int64_t groups;
  ///@{
  /// Parameters: weight (out_channels, in_channels/groups, kH, kW), bias (out_channels);
  /// bias is undefined when constructed with bias = false.
  Tensor weight, bias;
  ///@}
};

}  // namespace tapegrad::layers
