#pragma once
// float32 2-D convolution through oneDNN's convolution primitives (forward, backward-data,
// backward-weights with bias). The caller's tensors are plain NCHW / OIHW; oneDNN picks its
// own internal layout (format_tag::any) and the glue reorders in and out. Primitives are
// created once per shape, configuration and thread count and cached, so steady-state steps
// create none. Compiled to stubs (available() == false) when oneDNN was not found.
#include <cstdint>

namespace tapegrad::layers::functional::kernels {

/// One convolution: input (N, C, H, W), weight (O, C/G, kh, kw), output (N, O, OH, OW).
/// Stride, padding (left/top) and dilation as in PyTorch (dilation 1 = dense).
struct DnnlConvShape {
  std::int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, G, OH, OW;
  bool bias;
  bool operator==(const DnnlConvShape&) const = default;
};

/// True when tapegrad was built with oneDNN and it can run this shape (its right/bottom
/// padding, implied by the output size, is not negative).
bool dnnl_conv_supports(const DnnlConvShape& s);

/// y = conv(x, w) + b; b may be null when !s.bias. All pointers plain row-major.
void dnnl_conv_forward(const DnnlConvShape& s, const float* x, const float* w, const float* b, float* y);
/// The backward: dx = conv_transpose(dy, w) when dx is not null; dw = Σ_n dy ⋆ x and, with
/// s.bias, db = Σ_{n,i,j} dy when dw is not null (db must then be too). Overwrites them; dy
/// is reordered to oneDNN's layout once for both.
void dnnl_conv_backward(const DnnlConvShape& s, const float* x, const float* dy, const float* w, float* dx, float* dw, float* db);

/// Primitives created so far (cache misses), for tests that check steady state creates none.
std::int64_t dnnl_conv_primitives_created();

}  // namespace tapegrad::layers::functional::kernels
