#pragma once
// conv2d's gradients as recorded, differentiable ops (PyTorch's convolution_backward in
// tools/autograd/derivatives.yaml): a create_graph backward of conv2d runs them, and each
// one's backward is written with the other two and conv2d, so every derivative order works.
#include <cstdint>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/window.h>  // Size2

namespace tapegrad::layers::functional {

/// A convolution's window arguments, as conv2d takes them.
struct Conv2dParams {
  ///@{
  /// Stride (default 1), zero padding (0), dilation (1) and groups (1), as in conv2d.
  Size2 stride = 1, padding = 0, dilation = 1;
  std::int64_t groups = 1;
  ///@}
};

/// The input gradient of y = conv2d(x, weight) for the output gradient g: the transposed
/// convolution dx = conv_transpose2d(g, weight) with conv2d's window, (N, C_in, H, W) =
/// input_shape (given, since H_out loses the remainder of the stride). g (N, C_out, H_out,
/// W_out) with H_out, W_out those of conv2d on input_shape. Values from conv2d's backward
/// kernels (oneDNN where conv2d would run it). Backward: dg = conv2d(ddx, weight),
/// dweight = conv2d_weight_grad(ddx, g, weight.shape()). Throws std::invalid_argument as
/// conv2d does for the shapes, and naming the expected and actual shapes of g.
Tensor conv2d_input_grad(const Tensor& g, const Tensor& weight, const Shape& input_shape, const Conv2dParams& params);

/// The weight gradient of y = conv2d(x, weight) for the output gradient g: the correlation
/// dweight[o, c, p, q] = Σ_{n, i, j} g[n, o, i, j] · x[n, g·C/G + c, i·sh − ph + p·dh, j·sw − pw + q·dw],
/// of shape weight_shape (C_out, C_in/groups, kH, kW). Values from conv2d's backward kernels.
/// Backward: dx = conv2d_input_grad(g, ddw, x.shape()), dg = conv2d(x, ddw). Throws
/// std::invalid_argument as conv2d does, and naming the expected and actual shapes of g.
Tensor conv2d_weight_grad(const Tensor& x, const Tensor& g, const Shape& weight_shape, const Conv2dParams& params);

}  // namespace tapegrad::layers::functional
