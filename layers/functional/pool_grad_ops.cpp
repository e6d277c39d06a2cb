// The pools' backwards as recorded ops, each with its backward (its adjoint) beside it.
#include <tapegrad/layers/functional/pool_grad_ops.h>

#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/layers/functional/kernels/pool_windows.h>
#include <tapegrad/layers/functional/pooling.h>

namespace tapegrad::layers::functional {

namespace detail {

Tensor max_pool2d_scatter_values(const Tensor& g_in, const Tensor& idx, const Shape& x) {
  const Tensor g = g_in.detach();
  Tensor dx = Tensor::zeros(x, g.dtype());
  const std::int64_t HW = x[2] * x[3], L = g.size(2) * g.size(3);
  TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "max_pool2d_backward", [&] {
    const scalar_t* d = g.data<scalar_t>();
    scalar_t* o = dx.data<scalar_t>();
    const std::int64_t* ix = idx.data<std::int64_t>();
    over_planes(x[0] * x[1], HW, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t pl = b; pl < e; ++pl)
        for (std::int64_t l = 0; l < L; ++l) o[pl * HW + ix[pl * L + l]] += d[pl * L + l];
    });
  });
  return dx;
}

}  // namespace detail

namespace {

[[noreturn]] void fail(const char* who, const std::string& msg) { throw std::invalid_argument(std::string(who) + ": " + msg); }

void check_floating_4d(const char* who, const char* what, const Tensor& t) {
  if (!t.defined() || t.dim() != 4)
    fail(who, std::string("expected a 4-D ") + what + " (N, C, H, W), got shape " +
                  (t.defined() ? shape_str(t.shape()) : std::string("undefined")));
  tapegrad::kernels::check_floating(t, who);
}

// indices: Int64 of shape (N, C, OH, OW) = `out`, each in [0, H·W) of the input `x`.
void check_indices(const char* who, const Tensor& indices, const Shape& out, const Shape& x) {
  if (!indices.defined() || indices.dtype() != Dtype::Int64)
    fail(who, std::string("expected Int64 indices, got ") + (indices.defined() ? dtype_name(indices.dtype()) : "undefined"));
  if (indices.shape() != out) fail(who, "expected indices of shape " + shape_str(out) + ", got " + shape_str(indices.shape()));
  if (x.size() != 4 || x[0] != out[0] || x[1] != out[1])
    fail(who, "expected an input shape (" + std::to_string(out[0]) + ", " + std::to_string(out[1]) +
                  ", H, W), got " + shape_str(x));
  const std::int64_t HW = x[2] * x[3];
  const Tensor ic = indices;
  const std::int64_t* p = ic.data<std::int64_t>();
  for (std::int64_t i = 0; i < ic.numel(); ++i)
    if (p[i] < 0 || p[i] >= HW)
      fail(who, "expected indices in [0, " + std::to_string(HW) + ") (H·W of input " + shape_str(x) + "), got " +
                    std::to_string(p[i]) + " at flat position " + std::to_string(i));
}

}  // namespace

Tensor max_pool2d_scatter(const Tensor& g, const Tensor& indices, const Shape& input_shape) {
  const char* who = "max_pool2d_scatter";
  check_floating_4d(who, "gradient", g);
  check_indices(who, indices, g.shape(), input_shape);
  Tensor dx = detail::max_pool2d_scatter_values(g, indices, input_shape);
  if (autograd::needs_grad({&g}))
    autograd::record(
        who, dx, {g}, [indices](const Tensor& ddx, GradSink& gs) { gs.add(0, max_pool2d_gather(ddx, indices)); },
        autograd::kSavesNothing | autograd::kSecondOrder);
  return dx;
}

Tensor max_pool2d_gather(const Tensor& t_in, const Tensor& indices) {
  const char* who = "max_pool2d_gather";
  check_floating_4d(who, "input", t_in);
  if (!indices.defined() || indices.dim() != 4)
    fail(who, "expected 4-D indices (N, C, OH, OW), got shape " +
                  (indices.defined() ? shape_str(indices.shape()) : std::string("undefined")));
  check_indices(who, indices, indices.shape(), t_in.shape());
  const Tensor t = t_in.detach(), ix = indices;
  Tensor out = Tensor::empty(indices.shape(), t.dtype());
  const std::int64_t HW = t.size(2) * t.size(3), L = indices.size(2) * indices.size(3);
  TAPEGRAD_DISPATCH_FLOAT(t.dtype(), who, [&] {
    const scalar_t* s = t.data<scalar_t>();
    scalar_t* o = out.data<scalar_t>();
    const std::int64_t* p = ix.data<std::int64_t>();
    detail::over_planes(t.size(0) * t.size(1), L, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t pl = b; pl < e; ++pl)
        for (std::int64_t l = 0; l < L; ++l) o[pl * L + l] = s[pl * HW + p[pl * L + l]];
    });
  });
  if (autograd::needs_grad({&t_in}))
    autograd::record(
        who, out, {t_in},
        [indices, shape = t_in.shape()](const Tensor& go, GradSink& gs) {
          gs.add(0, max_pool2d_scatter(go, indices, shape));
        },
        autograd::kSavesNothing | autograd::kSecondOrder);
  return out;
}

Tensor avg_pool2d_backward(const Tensor& g_in, const Shape& input_shape, Size2 kernel_size, std::optional<Size2> stride,
                           Size2 padding, bool ceil_mode, bool count_include_pad,
                           std::optional<std::int64_t> divisor_override) {
  const char* who = "avg_pool2d_backward";
  check_floating_4d(who, "gradient", g_in);
  const detail::PoolGeom geo = detail::pool_geom(input_shape, who, kernel_size, stride, padding, 1, ceil_mode, false);
  detail::check_divisor(who, divisor_override);
  const Shape out{geo.N, geo.C, geo.OH, geo.OW};
  if (g_in.shape() != out)
    fail(who, "expected g of avg_pool2d's output shape " + shape_str(out) + ", got " + shape_str(g_in.shape()));
  const Tensor g = g_in.detach();
  Tensor dx = Tensor::zeros(input_shape, g.dtype());
  auto window = [geo, count_include_pad, divisor_override](std::int64_t i, std::int64_t j) {
    return detail::avg_window(geo, i, j, count_include_pad, divisor_override);
  };
  TAPEGRAD_DISPATCH_FLOAT(g.dtype(), who, [&] {
    detail::spread_windows(g.data<scalar_t>(), dx.data<scalar_t>(), geo.planes(), geo.H, geo.W, geo.OH, geo.OW, window);
  });
  if (autograd::needs_grad({&g_in}))
    autograd::record(
        who, dx, {g_in},
        [kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override](const Tensor& ddx, GradSink& gs) {
          gs.add(0, avg_pool2d(ddx, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override));
        },
        autograd::kSavesNothing | autograd::kSecondOrder);
  return dx;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& g_in, const Shape& input_shape) {
  const char* who = "adaptive_avg_pool2d_backward";
  check_floating_4d(who, "gradient", g_in);
  const Size2 out{g_in.size(2), g_in.size(3)};
  detail::check_adaptive(input_shape, who, out);
  if (input_shape[0] != g_in.size(0) || input_shape[1] != g_in.size(1))
    fail(who, "expected g of shape (" + std::to_string(input_shape[0]) + ", " + std::to_string(input_shape[1]) +
                  ", OH, OW) for input shape " + shape_str(input_shape) + ", got " + shape_str(g_in.shape()));
  const Tensor g = g_in.detach();
  const std::int64_t H = input_shape[2], W = input_shape[3];
  Tensor dx = Tensor::zeros(input_shape, g.dtype());
  auto window = [H, W, out](std::int64_t i, std::int64_t j) { return detail::adaptive_window(i, j, H, W, out); };
  TAPEGRAD_DISPATCH_FLOAT(g.dtype(), who, [&] {
    detail::spread_windows(g.data<scalar_t>(), dx.data<scalar_t>(), input_shape[0] * input_shape[1], H, W, out.h,
                           out.w, window);
  });
  if (autograd::needs_grad({&g_in}))
    autograd::record(
        who, dx, {g_in}, [out](const Tensor& ddx, GradSink& gs) { gs.add(0, adaptive_avg_pool2d(ddx, out)); },
        autograd::kSavesNothing | autograd::kSecondOrder);
  return dx;
}

}  // namespace tapegrad::layers::functional
