// 2-D convolution: the backend choice and the recorded op (its kernels: conv_kernels.cpp; its
// gradients as recorded ops for a create_graph pass: conv_grad_ops.cpp).
#include <tapegrad/layers/functional/conv.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/layers/functional/conv_grad_ops.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>
#include <tapegrad/layers/functional/kernels/conv_plan.h>

namespace tapegrad::layers::functional {

bool conv_onednn_available() {
#if defined(TAPEGRAD_HAVE_DNNL)
  return true;
#else
  return false;
#endif
}

ConvBackend parse_conv_backend(const std::string& name) {
  if (name.empty() || name == "auto") return ConvBackend::Auto;
  if (name == "im2col") return ConvBackend::Im2col;
  if (name == "onednn" && conv_onednn_available()) return ConvBackend::OneDNN;
  throw std::invalid_argument("conv backend: expected auto, im2col" +
                              std::string(conv_onednn_available() ? " or onednn" : " (built without oneDNN)") +
                              ", got '" + name + "'");
}

std::size_t conv_primitive_cache_capacity() { return kernels::dnnl_conv_cache_capacity(); }
void set_conv_primitive_cache_capacity(std::size_t configurations) {
  kernels::dnnl_conv_set_cache_capacity(configurations);
}
std::size_t conv_primitive_cache_size() { return kernels::dnnl_conv_cache_entries(); }

namespace {

ConvBackend backend_from_env() {
  const char* v = std::getenv("TAPEGRAD_CONV_BACKEND");
  return parse_conv_backend(v ? v : "");
}

std::atomic<int> g_backend{-1};  // -1: not read from the environment yet

}  // namespace

void set_conv_backend(ConvBackend backend) {
  if (backend == ConvBackend::OneDNN && !conv_onednn_available())
    throw std::invalid_argument("set_conv_backend: expected Auto or Im2col, got OneDNN (tapegrad was built without oneDNN)");
  g_backend = static_cast<int>(backend);
}

ConvBackend conv_backend() {
  int b = g_backend.load();
  if (b < 0) {
    b = static_cast<int>(backend_from_env());
    g_backend = b;
  }
  return static_cast<ConvBackend>(b);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              std::int64_t groups) {
  const detail::ConvPlan pl = detail::conv_plan("conv2d", x, weight, bias, stride, padding, dilation, groups);
  const bool has_bias = bias.defined();
  const bool dnnl = detail::conv_uses_dnnl(x.dtype(), pl, has_bias);
  Tensor y = detail::conv_forward_values(x, weight, bias, pl, dnnl);
  if (!autograd::needs_grad({&x, &weight, &bias})) return y;
  const Conv2dParams params{stride, padding, dilation, groups};
  autograd::record(
      "conv2d", y, {x, weight, bias},
      [x, weight, has_bias, dnnl, pl, params](const Tensor& gy, GradSink& gs) {
        if (autograd::creating_graph()) {
          // recorded ops, each differentiable again (conv_grad_ops.h)
          if (gs.needs(0)) gs.add(0, conv2d_input_grad(gy, weight, x.shape(), params));
          if (gs.needs(1)) gs.add(1, conv2d_weight_grad(x, gy, weight.shape(), params));
          if (has_bias && gs.needs(2)) gs.add(2, sum(gy, {0, 2, 3}));
          return;
        }
        // the fast kernels of the forward's backend
        detail::ConvGrads r = detail::conv_backward_values(gy, x, weight, pl, dnnl, has_bias, gs.needs(0), gs.needs(1),
                                                           has_bias && gs.needs(2));
        if (r.dx.defined()) gs.add(0, r.dx);
        if (r.dw.defined()) gs.add(1, r.dw);
        if (r.db.defined()) gs.add(2, r.db);
      },
      autograd::kSavesInputs | autograd::kSecondOrder);
  return y;
}

}  // namespace tapegrad::layers::functional
