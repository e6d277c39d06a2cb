// 2-D max, average and adaptive average pooling: forward and backward side by side (their
// backwards as recorded ops for a create_graph pass: pool_grad_ops.cpp).
#include <tapegrad/layers/functional/pooling.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/functional/kernels/max_pool_2x2.h>
#include <tapegrad/layers/functional/kernels/pool_windows.h>
#include <tapegrad/layers/functional/pool_grad_ops.h>

namespace tapegrad::layers::functional {

namespace detail {

PoolGeom pool_geom(const Shape& x, const char* op, Size2 k, std::optional<Size2> stride, Size2 p, Size2 d,
                   bool ceil_mode, bool taps_inside_only) {
  const std::string o = op;
  if (x.size() != 4) throw std::invalid_argument(o + ": expected a 4-D input (N, C, H, W), got shape " + shape_str(x));
  // as PyTorch: no window of an empty image holds a value (an average over one divides by 0)
  if (x[2] < 1 || x[3] < 1)
    throw std::invalid_argument(o + ": expected a non-empty spatial size, got input shape " + shape_str(x));
  const Size2 s = stride.value_or(k);
  const WindowGeometry win{k, s, p, d};
  check_window_args(o, win, PaddingLimit::HalfKernel);
  check_window_extent(o, x, win);
  PoolGeom g{x[0], x[1], x[2], x[3], 0, 0, k, s, p, d};
  g.OH = pool_output_size(g.H, k.h, s.h, p.h, d.h, ceil_mode);
  g.OW = pool_output_size(g.W, k.w, s.w, p.w, d.w, ceil_mode);
  if (g.OH < 1 || g.OW < 1)
    throw std::invalid_argument(o + ": input of shape " + shape_str(x) + " gives output size (" +
                                std::to_string(g.OH) + ", " + std::to_string(g.OW) +
                                "), expected at least (1, 1): the kernel is larger than the padded input");
  if (taps_inside_only) check_window_taps(o, x, win, ceil_mode, g.OH, g.OW);
  return g;
}

void check_divisor(const char* op, std::optional<std::int64_t> divisor_override) {
  if (divisor_override && *divisor_override == 0)
    throw std::invalid_argument(std::string(op) + ": expected divisor_override != 0, got 0");
}

void check_adaptive(const Shape& x, const char* op, Size2 out) {
  const std::string o = op;
  if (x.size() != 4) throw std::invalid_argument(o + ": expected a 4-D input (N, C, H, W), got shape " + shape_str(x));
  if (out.h < 1 || out.w < 1) throw std::invalid_argument(o + ": expected output_size >= 1, got " + out.str());
  if (x[2] < 1 || x[3] < 1)
    throw std::invalid_argument(o + ": expected a non-empty spatial size, got input shape " + shape_str(x));
}

}  // namespace detail

namespace {

using detail::PoolGeom;
using detail::Window;
using detail::over_planes;
using detail::walk_windows;

// The tensor's checks (defined, floating), then the geometry's.
PoolGeom pool_geom(const Tensor& x, const char* op, Size2 k, std::optional<Size2> stride, Size2 p, Size2 d,
                   bool ceil_mode, bool taps_inside_only) {
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument(std::string(op) + ": expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  tapegrad::kernels::check_floating(x, op);
  return detail::pool_geom(x.shape(), op, k, stride, p, d, ceil_mode, taps_inside_only);
}

// ---- max ------------------------------------------------------------------------------
// "v replaces the running maximum m": strictly greater, or NaN (PyTorch's max-pool rule).
template <class T>
inline bool replaces(T v, T m) {
  return v > m || v != v;
}

// The common 2×2, stride 2 pool with every window inside the input and an even width: the
// same rule as the general loop below, in row-major window order, run by a kernel compiled
// per ISA level (kernels/max_pool_2x2.h).
template <class T>
void max_forward_2x2(const T* x, T* y, std::int64_t* idx, const PoolGeom& g) {
  const std::int64_t H = g.H, W = g.W, OH = g.OH, OW = g.OW;
  over_planes(g.planes(), H * W, [=](std::int64_t b, std::int64_t e) {
    kernels::max_pool_2x2<T>().planes(x, y, idx, b, e, H, W, OH, OW);
  });
}

template <class T>
void max_forward(const T* x, T* y, std::int64_t* idx, const PoolGeom& g) {
  if (g.k == Size2(2) && g.s == Size2(2) && g.p == Size2(0) && g.d == Size2(1) && 2 * g.OH <= g.H &&
      2 * g.OW == g.W)
    return max_forward_2x2(x, y, idx, g);
  // the dilated window clipped to the input (its first row/column the first tap inside)
  auto window = [&g](std::int64_t i, std::int64_t j) {
    Window a;
    a.h0 = i * g.s.h - g.p.h;
    a.w0 = j * g.s.w - g.p.w;
    a.h1 = std::min(a.h0 + (g.k.h - 1) * g.d.h + 1, g.H);
    a.w1 = std::min(a.w0 + (g.k.w - 1) * g.d.w + 1, g.W);
    while (a.h0 < 0) a.h0 += g.d.h;
    while (a.w0 < 0) a.w0 += g.d.w;
    a.dh = g.d.h;
    a.dw = g.d.w;
    return a;
  };
  walk_windows(g.planes(), g.H * g.W, g.OH, g.OW, window, [&](std::int64_t pl, std::int64_t o, const Window& a) {
    const T* xp = x + pl * g.H * g.W;
    std::int64_t best = a.h0 * g.W + a.w0;
    T m = -std::numeric_limits<T>::infinity();
    for (std::int64_t h = a.h0; h < a.h1; h += a.dh)
      for (std::int64_t w = a.w0; w < a.w1; w += a.dw) {
        const T v = xp[h * g.W + w];
        if (replaces(v, m)) {
          m = v;
          best = h * g.W + w;
        }
      }
    y[o] = m;
    idx[o] = best;
  });
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  const PoolGeom g = pool_geom(x, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode, true);
  Tensor y = Tensor::empty({g.N, g.C, g.OH, g.OW}, x.dtype());
  Tensor idx = Tensor::empty({g.N, g.C, g.OH, g.OW}, Dtype::Int64);
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "max_pool2d",
                          [&] { max_forward<scalar_t>(x.data<scalar_t>(), y.data<scalar_t>(), idx.data<std::int64_t>(), g); });
  if (autograd::needs_grad({&x}))
    autograd::record("max_pool2d", y, {x}, [idx, g](const Tensor& gy, GradSink& gs) {
      // dx[argmax] += dy, per plane; a create_graph pass records it (its backward gathers)
      const Shape xs{g.N, g.C, g.H, g.W};
      gs.add(0, autograd::creating_graph() ? max_pool2d_scatter(gy, idx, xs) : detail::max_pool2d_scatter_values(gy, idx, xs));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return y;
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  const PoolGeom g = pool_geom(x, "avg_pool2d", kernel_size, stride, padding, 1, ceil_mode, false);
  detail::check_divisor("avg_pool2d", divisor_override);
  auto window = [g, count_include_pad, divisor_override](std::int64_t i, std::int64_t j) {
    return detail::avg_window(g, i, j, count_include_pad, divisor_override);
  };
  Tensor y = Tensor::empty({g.N, g.C, g.OH, g.OW}, x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "avg_pool2d", [&] {
    detail::average_windows(x.data<scalar_t>(), y.data<scalar_t>(), g.planes(), g.H, g.W, g.OH, g.OW, window);
  });
  if (autograd::needs_grad({&x}))
    autograd::record("avg_pool2d", y, {x}, [g, window, stride, ceil_mode, count_include_pad, divisor_override](const Tensor& gy, GradSink& gs) {
      if (autograd::creating_graph()) {  // the adjoint as a recorded op (its backward: avg_pool2d)
        gs.add(0, avg_pool2d_backward(gy, {g.N, g.C, g.H, g.W}, g.k, stride, g.p, ceil_mode, count_include_pad,
                                      divisor_override));
        return;
      }
      // dx[window] += dy / divisor
      Tensor dx = Tensor::zeros({g.N, g.C, g.H, g.W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "avg_pool2d_backward", [&] {
        detail::spread_windows(gy.data<scalar_t>(), dx.data<scalar_t>(), g.planes(), g.H, g.W, g.OH, g.OW, window);
      });
      gs.add(0, dx);
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 out) {
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument("adaptive_avg_pool2d: expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  tapegrad::kernels::check_floating(x, "adaptive_avg_pool2d");
  detail::check_adaptive(x.shape(), "adaptive_avg_pool2d", out);
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  auto window = [H, W, out](std::int64_t i, std::int64_t j) { return detail::adaptive_window(i, j, H, W, out); };
  Tensor y = Tensor::empty({N, C, out.h, out.w}, x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "adaptive_avg_pool2d", [&] {
    detail::average_windows(x.data<scalar_t>(), y.data<scalar_t>(), N * C, H, W, out.h, out.w, window);
  });
  if (autograd::needs_grad({&x}))
    autograd::record("adaptive_avg_pool2d", y, {x}, [N, C, H, W, out, window](const Tensor& gy, GradSink& gs) {
      if (autograd::creating_graph()) {  // the adjoint as a recorded op (its backward: adaptive_avg_pool2d)
        gs.add(0, adaptive_avg_pool2d_backward(gy, {N, C, H, W}));
        return;
      }
      // dx[window] += dy / window size
      Tensor dx = Tensor::zeros({N, C, H, W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "adaptive_avg_pool2d_backward", [&] {
        detail::spread_windows(gy.data<scalar_t>(), dx.data<scalar_t>(), N * C, H, W, out.h, out.w, window);
      });
      gs.add(0, dx);
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  return y;
}

}  // namespace tapegrad::layers::functional
