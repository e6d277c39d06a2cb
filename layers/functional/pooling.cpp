// 2-D max, average and adaptive average pooling: forward and backward side by side.
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

namespace tapegrad::layers::functional {

namespace {

struct PoolGeom {
  std::int64_t N, C, H, W, OH, OW;
  Size2 k, s, p, d;
  std::int64_t planes() const { return N * C; }
};

// The geometry of a pool, after every check of window.h. taps_inside_only: the op reads only
// inside the input (max pooling ignores the padding), so each window needs a tap there.
PoolGeom pool_geom(const Tensor& x, const char* op, Size2 k, std::optional<Size2> stride, Size2 p, Size2 d,
                   bool ceil_mode, bool taps_inside_only) {
  const std::string o = op;
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument(o + ": expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  tapegrad::kernels::check_floating(x, op);
  // as PyTorch: no window of an empty image holds a value (an average over one divides by 0)
  if (x.size(2) < 1 || x.size(3) < 1)
    throw std::invalid_argument(o + ": expected a non-empty spatial size, got input shape " + shape_str(x.shape()));
  const Size2 s = stride.value_or(k);
  const WindowGeometry win{k, s, p, d};
  check_window_args(o, win, PaddingLimit::HalfKernel);
  check_window_extent(o, x.shape(), win);
  PoolGeom g{x.size(0), x.size(1), x.size(2), x.size(3), 0, 0, k, s, p, d};
  g.OH = pool_output_size(g.H, k.h, s.h, p.h, d.h, ceil_mode);
  g.OW = pool_output_size(g.W, k.w, s.w, p.w, d.w, ceil_mode);
  if (g.OH < 1 || g.OW < 1)
    throw std::invalid_argument(o + ": input of shape " + shape_str(x.shape()) + " gives output size (" +
                                std::to_string(g.OH) + ", " + std::to_string(g.OW) +
                                "), expected at least (1, 1): the kernel is larger than the padded input");
  if (taps_inside_only) check_window_taps(o, x.shape(), win, ceil_mode, g.OH, g.OW);
  return g;
}

template <class F>
void over_planes(std::int64_t planes, std::int64_t plane_size, F&& f) {
  parallel_for(planes, parallel_rows_grain(plane_size), f);
}

// ---- the window walk every pool shares ------------------------------------------------
// One pooling window: rows [h0, h1) step dh, columns [w0, w1) step dw, all inside the input,
// and the divisor of an average over it.
struct Window {
  std::int64_t h0, h1, w0, w1, dh = 1, dw = 1, div = 1;
};

// Calls f(plane, o, window(i, j)) for every output o = (plane·OH + i)·OW + j, planes split
// over the threads.
template <class WindowOf, class F>
void walk_windows(std::int64_t planes, std::int64_t HW, std::int64_t OH, std::int64_t OW, WindowOf window, F f) {
  over_planes(planes, HW, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl)
      for (std::int64_t i = 0; i < OH; ++i)
        for (std::int64_t j = 0; j < OW; ++j) f(pl, (pl * OH + i) * OW + j, window(i, j));
  });
}

// y[o] = Σ window / divisor (avg and adaptive avg forward).
template <class T, class WindowOf>
void average_windows(const T* x, T* y, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                     std::int64_t OW, WindowOf window) {
  walk_windows(planes, H * W, OH, OW, window, [&](std::int64_t pl, std::int64_t o, const Window& a) {
    T s = 0;
    for (std::int64_t h = a.h0; h < a.h1; ++h)
      for (std::int64_t w = a.w0; w < a.w1; ++w) s += x[(pl * H + h) * W + w];
    y[o] = s / static_cast<T>(a.div);
  });
}

// dx[window] += dy[o] / divisor (their backward); dx zero-filled by the caller.
template <class T, class WindowOf>
void spread_windows(const T* dy, T* dx, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                    std::int64_t OW, WindowOf window) {
  walk_windows(planes, H * W, OH, OW, window, [&](std::int64_t pl, std::int64_t o, const Window& a) {
    const T v = dy[o] / static_cast<T>(a.div);
    for (std::int64_t h = a.h0; h < a.h1; ++h)
      for (std::int64_t w = a.w0; w < a.w1; ++w) dx[(pl * H + h) * W + w] += v;
  });
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

// ---- average: the window and its divisor (PyTorch's avg_pool2d CPU rule) -------------------
Window avg_window(const PoolGeom& g, std::int64_t i, std::int64_t j, bool count_include_pad) {
  std::int64_t h0 = i * g.s.h - g.p.h, w0 = j * g.s.w - g.p.w;
  std::int64_t h1 = std::min(h0 + g.k.h, g.H + g.p.h), w1 = std::min(w0 + g.k.w, g.W + g.p.w);
  const std::int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, g.H);
  w1 = std::min(w1, g.W);
  return {h0, h1, w0, w1, 1, 1, count_include_pad ? pool_size : (h1 - h0) * (w1 - w0)};
}

// ---- adaptive average ------------------------------------------------------------------------
std::int64_t start_index(std::int64_t o, std::int64_t out, std::int64_t in) { return (o * in) / out; }
std::int64_t end_index(std::int64_t o, std::int64_t out, std::int64_t in) { return ((o + 1) * in + out - 1) / out; }
Window adaptive_window(std::int64_t i, std::int64_t j, std::int64_t H, std::int64_t W, Size2 out) {
  Window a{start_index(i, out.h, H), end_index(i, out.h, H), start_index(j, out.w, W), end_index(j, out.w, W)};
  a.div = (a.h1 - a.h0) * (a.w1 - a.w0);
  return a;
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
      // dx[argmax] += dy, per plane
      Tensor dx = Tensor::zeros({g.N, g.C, g.H, g.W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "max_pool2d_backward", [&] {
        const scalar_t* d = gy.data<scalar_t>();
        scalar_t* o = dx.data<scalar_t>();
        const std::int64_t* ix = idx.data<std::int64_t>();
        const std::int64_t L = g.OH * g.OW;
        over_planes(g.planes(), g.H * g.W, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t pl = b; pl < e; ++pl)
            for (std::int64_t l = 0; l < L; ++l) o[pl * g.H * g.W + ix[pl * L + l]] += d[pl * L + l];
        });
      });
      gs.add(0, dx);
    });
  return y;
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad) {
  const PoolGeom g = pool_geom(x, "avg_pool2d", kernel_size, stride, padding, 1, ceil_mode, false);
  auto window = [g, count_include_pad](std::int64_t i, std::int64_t j) { return avg_window(g, i, j, count_include_pad); };
  Tensor y = Tensor::empty({g.N, g.C, g.OH, g.OW}, x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "avg_pool2d", [&] {
    average_windows(x.data<scalar_t>(), y.data<scalar_t>(), g.planes(), g.H, g.W, g.OH, g.OW, window);
  });
  if (autograd::needs_grad({&x}))
    autograd::record("avg_pool2d", y, {x}, [g, window](const Tensor& gy, GradSink& gs) {
      // dx[window] += dy / divisor
      Tensor dx = Tensor::zeros({g.N, g.C, g.H, g.W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "avg_pool2d_backward", [&] {
        spread_windows(gy.data<scalar_t>(), dx.data<scalar_t>(), g.planes(), g.H, g.W, g.OH, g.OW, window);
      });
      gs.add(0, dx);
    });
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 out) {
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument("adaptive_avg_pool2d: expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  tapegrad::kernels::check_floating(x, "adaptive_avg_pool2d");
  if (out.h < 1 || out.w < 1)
    throw std::invalid_argument("adaptive_avg_pool2d: expected output_size >= 1, got " + out.str());
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (H < 1 || W < 1)
    throw std::invalid_argument("adaptive_avg_pool2d: expected a non-empty spatial size, got input shape " +
                                shape_str(x.shape()));
  auto window = [H, W, out](std::int64_t i, std::int64_t j) { return adaptive_window(i, j, H, W, out); };
  Tensor y = Tensor::empty({N, C, out.h, out.w}, x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "adaptive_avg_pool2d", [&] {
    average_windows(x.data<scalar_t>(), y.data<scalar_t>(), N * C, H, W, out.h, out.w, window);
  });
  if (autograd::needs_grad({&x}))
    autograd::record("adaptive_avg_pool2d", y, {x}, [N, C, H, W, out, window](const Tensor& gy, GradSink& gs) {
      // dx[window] += dy / window size
      Tensor dx = Tensor::zeros({N, C, H, W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "adaptive_avg_pool2d_backward", [&] {
        spread_windows(gy.data<scalar_t>(), dx.data<scalar_t>(), N * C, H, W, out.h, out.w, window);
      });
      gs.add(0, dx);
    });
  return y;
}

}  // namespace tapegrad::layers::functional
