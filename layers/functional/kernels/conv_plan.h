#pragma once
// conv2d's checked geometry and its value kernels (im2col + GEMM, oneDNN, the zero-size case),
// shared by conv2d (conv.cpp) and its recorded gradient ops (conv_grad_ops.cpp). No autograd
// here: every function computes plain values.
#include <cstdint>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/kernels/im2col.h>
#include <tapegrad/layers/functional/window.h>

namespace tapegrad::layers::functional::detail {

/// One convolution's sizes after every check of conv2d.
struct ConvPlan {
  std::int64_t N, Cin, Cout, G, Cg, Og;
  kernels::ConvGeom geom;
  bool direct;  ///< 1×1, stride 1, no padding: the image itself is the unfolded matrix
  std::int64_t K() const { return geom.rows(); }
  std::int64_t L() const { return geom.cols(); }
  std::int64_t in_plane() const { return Cg * geom.H * geom.W; }  ///< one group of one image
  Shape input_shape() const { return {N, Cin, geom.H, geom.W}; }
  Shape weight_shape() const { return {Cout, Cg, geom.kh, geom.kw}; }
  Shape output_shape() const { return {N, Cout, geom.OH, geom.OW}; }
};

/// Checks x (N, C_in, H, W), w (C_out, C_in/groups, kH, kW) and b (C_out or undefined) as
/// conv2d documents, throwing std::invalid_argument "<who>: ..." naming the values.
ConvPlan conv_plan(const char* who, const Tensor& x, const Tensor& w, const Tensor& b, Size2 stride, Size2 padding,
                   Size2 dilation, std::int64_t groups);
/// The same checks on shapes alone (no dtype checks).
ConvPlan conv_plan(const char* who, const Shape& x, const Shape& w, Size2 stride, Size2 padding, Size2 dilation,
                   std::int64_t groups);

/// Whether the plan runs oneDNN for `dtype` (the current ConvBackend and, for Auto, the
/// measured rule); never for float64 or a zero-size plan.
bool conv_uses_dnnl(Dtype dtype, const ConvPlan& pl, bool bias);

/// y = conv(x, w) + b, (N, C_out, H_out, W_out); b may be undefined. `dnnl`: run oneDNN
/// (float32 only; see conv_uses_dnnl), else im2col + GEMM (or the zero-size rule).
Tensor conv_forward_values(const Tensor& x, const Tensor& w, const Tensor& b, const ConvPlan& pl, bool dnnl);

/// dx, dw, db of y = conv(x, w) + b for the incoming gradient gy, each computed only when
/// asked (x is read only for dw, w only for dx, so either may be undefined when not needed).
/// `bias`: the convolution had a bias (oneDNN computes db beside dw then).
struct ConvGrads {
  Tensor dx, dw, db;
};
ConvGrads conv_backward_values(const Tensor& gy, const Tensor& x, const Tensor& w, const ConvPlan& pl, bool dnnl,
                               bool bias, bool need_x, bool need_w, bool need_b);

}  // namespace tapegrad::layers::functional::detail
