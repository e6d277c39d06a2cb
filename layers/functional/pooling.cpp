// 2-D max, average and adaptive average pooling: forward and backward side by side.
#include "layers/functional/pooling.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/autograd.h"
#include "core/ops/kernels.h"
#include "core/parallel.h"

namespace tapegrad::layers::functional {

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

struct PoolGeom {
  std::int64_t N, C, H, W, OH, OW;
  Size2 k, s, p, d;
  std::int64_t planes() const { return N * C; }
};

PoolGeom pool_geom(const Tensor& x, const char* op, Size2 k, std::optional<Size2> stride, Size2 p, Size2 d,
                   bool ceil_mode) {
  const std::string o = op;
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument(o + ": expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  kernels::check_floating(x, op);
  const Size2 s = stride.value_or(k);
  if (k.h < 1 || k.w < 1) throw std::invalid_argument(o + ": expected kernel_size >= 1, got " + k.str());
  if (s.h < 1 || s.w < 1) throw std::invalid_argument(o + ": expected stride >= 1, got " + s.str());
  if (d.h < 1 || d.w < 1) throw std::invalid_argument(o + ": expected dilation >= 1, got " + d.str());
  if (p.h < 0 || p.w < 0 || p.h > k.h / 2 || p.w > k.w / 2)
    throw std::invalid_argument(o + ": expected 0 <= padding <= kernel_size/2 (kernel_size " + k.str() +
                                "), got padding " + p.str());
  // The padded input, the dilated window and the stride stay below 2^62, so the window
  // arithmetic (sums of two such sizes) cannot overflow.
  constexpr __int128 kMaxExtent = __int128{1} << 62;
  const auto too_big = [&](std::int64_t in, std::int64_t kk, std::int64_t ss, std::int64_t pp, std::int64_t dd) {
    return in + 2 * static_cast<__int128>(pp) >= kMaxExtent || static_cast<__int128>(dd) * (kk - 1) + 1 >= kMaxExtent ||
           ss >= kMaxExtent;
  };
  if (too_big(x.size(2), k.h, s.h, p.h, d.h) || too_big(x.size(3), k.w, s.w, p.w, d.w))
    throw std::invalid_argument(o + ": expected the padded input size, the dilated kernel size and the stride below "
                                "2^62, got input " + shape_str(x.shape()) + ", kernel_size " + k.str() + ", stride " +
                                s.str() + ", padding " + p.str() + ", dilation " + d.str());
  PoolGeom g{x.size(0), x.size(1), x.size(2), x.size(3), 0, 0, k, s, p, d};
  g.OH = pool_output_size(g.H, k.h, s.h, p.h, d.h, ceil_mode);
  g.OW = pool_output_size(g.W, k.w, s.w, p.w, d.w, ceil_mode);
  if (g.OH < 1 || g.OW < 1)
    throw std::invalid_argument(o + ": input of shape " + shape_str(x.shape()) + " gives output size (" +
                                std::to_string(g.OH) + ", " + std::to_string(g.OW) +
                                "), expected at least (1, 1): the kernel is larger than the padded input");
  return g;
}

template <class F>
void over_planes(std::int64_t planes, std::int64_t plane_size, F&& f) {
  parallel_for(planes, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(plane_size, 1)), f);
}

// ---- max ------------------------------------------------------------------------------
// The common 2×2, stride 2 pool with every window inside the input: the same rule as the
// general loop below (strictly greater or NaN replaces, in row-major window order).
template <class T>
void max_forward_2x2(const T* x, T* y, std::int64_t* idx, const PoolGeom& g) {
  over_planes(g.planes(), g.H * g.W, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * g.H * g.W;
      T* yp = y + pl * g.OH * g.OW;
      std::int64_t* ip = idx + pl * g.OH * g.OW;
      for (std::int64_t i = 0; i < g.OH; ++i)
        for (std::int64_t j = 0; j < g.OW; ++j) {
          const std::int64_t p0 = 2 * i * g.W + 2 * j;
          const std::int64_t cand[4] = {p0, p0 + 1, p0 + g.W, p0 + g.W + 1};
          T m = -std::numeric_limits<T>::infinity();
          std::int64_t best = p0;
          for (std::int64_t c : cand) {
            const T v = xp[c];
            if (v > m || v != v) {
              m = v;
              best = c;
            }
          }
          yp[i * g.OW + j] = m;
          ip[i * g.OW + j] = best;
        }
    }
  });
}

template <class T>
void max_forward(const T* x, T* y, std::int64_t* idx, const PoolGeom& g) {
  if (g.k == Size2(2) && g.s == Size2(2) && g.p == Size2(0) && g.d == Size2(1) && 2 * g.OH <= g.H &&
      2 * g.OW <= g.W)
    return max_forward_2x2(x, y, idx, g);
  over_planes(g.planes(), g.H * g.W, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * g.H * g.W;
      for (std::int64_t i = 0; i < g.OH; ++i) {
        std::int64_t h0 = i * g.s.h - g.p.h;
        const std::int64_t h1 = std::min(h0 + (g.k.h - 1) * g.d.h + 1, g.H);
        while (h0 < 0) h0 += g.d.h;
        for (std::int64_t j = 0; j < g.OW; ++j) {
          std::int64_t w0 = j * g.s.w - g.p.w;
          const std::int64_t w1 = std::min(w0 + (g.k.w - 1) * g.d.w + 1, g.W);
          while (w0 < 0) w0 += g.d.w;
          std::int64_t best = h0 * g.W + w0;
          T m = -std::numeric_limits<T>::infinity();
          for (std::int64_t h = h0; h < h1; h += g.d.h)
            for (std::int64_t w = w0; w < w1; w += g.d.w) {
              const T v = xp[h * g.W + w];
              if (v > m || std::isnan(v)) {
                m = v;
                best = h * g.W + w;
              }
            }
          const std::int64_t o = (pl * g.OH + i) * g.OW + j;
          y[o] = m;
          idx[o] = best;
        }
      }
    }
  });
}

// ---- average: the window and its divisor (PyTorch's avg_pool2d CPU rule) -------------------
struct AvgWindow {
  std::int64_t h0, h1, w0, w1, div;
};
AvgWindow avg_window(const PoolGeom& g, std::int64_t i, std::int64_t j, bool count_include_pad) {
  std::int64_t h0 = i * g.s.h - g.p.h, w0 = j * g.s.w - g.p.w;
  std::int64_t h1 = std::min(h0 + g.k.h, g.H + g.p.h), w1 = std::min(w0 + g.k.w, g.W + g.p.w);
  const std::int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, g.H);
  w1 = std::min(w1, g.W);
  return {h0, h1, w0, w1, count_include_pad ? pool_size : (h1 - h0) * (w1 - w0)};
}

// ---- adaptive average ------------------------------------------------------------------------
std::int64_t start_index(std::int64_t o, std::int64_t out, std::int64_t in) { return (o * in) / out; }
std::int64_t end_index(std::int64_t o, std::int64_t out, std::int64_t in) { return ((o + 1) * in + out - 1) / out; }

}  // namespace

std::int64_t pool_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation, bool ceil_mode) {
  std::int64_t out =
      floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  const PoolGeom g = pool_geom(x, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode);
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
  const PoolGeom g = pool_geom(x, "avg_pool2d", kernel_size, stride, padding, 1, ceil_mode);
  Tensor y = Tensor::empty({g.N, g.C, g.OH, g.OW}, x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "avg_pool2d", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = y.data<scalar_t>();
    over_planes(g.planes(), g.H * g.W, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t pl = b; pl < e; ++pl)
        for (std::int64_t i = 0; i < g.OH; ++i)
          for (std::int64_t j = 0; j < g.OW; ++j) {
            const AvgWindow a = avg_window(g, i, j, count_include_pad);
            scalar_t s = 0;
            for (std::int64_t h = a.h0; h < a.h1; ++h)
              for (std::int64_t w = a.w0; w < a.w1; ++w) s += xp[(pl * g.H + h) * g.W + w];
            yp[(pl * g.OH + i) * g.OW + j] = s / static_cast<scalar_t>(a.div);
          }
    });
  });
  if (autograd::needs_grad({&x}))
    autograd::record("avg_pool2d", y, {x}, [g, count_include_pad](const Tensor& gy, GradSink& gs) {
      // dx[window] += dy / divisor
      Tensor dx = Tensor::zeros({g.N, g.C, g.H, g.W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "avg_pool2d_backward", [&] {
        const scalar_t* d = gy.data<scalar_t>();
        scalar_t* o = dx.data<scalar_t>();
        over_planes(g.planes(), g.H * g.W, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t pl = b; pl < e; ++pl)
            for (std::int64_t i = 0; i < g.OH; ++i)
              for (std::int64_t j = 0; j < g.OW; ++j) {
                const AvgWindow a = avg_window(g, i, j, count_include_pad);
                const scalar_t v = d[(pl * g.OH + i) * g.OW + j] / static_cast<scalar_t>(a.div);
                for (std::int64_t h = a.h0; h < a.h1; ++h)
                  for (std::int64_t w = a.w0; w < a.w1; ++w) o[(pl * g.H + h) * g.W + w] += v;
              }
        });
      });
      gs.add(0, dx);
    });
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 out) {
  if (!x.defined() || x.dim() != 4)
    throw std::invalid_argument("adaptive_avg_pool2d: expected a 4-D input (N, C, H, W), got shape " +
                                (x.defined() ? shape_str(x.shape()) : std::string("undefined")));
  kernels::check_floating(x, "adaptive_avg_pool2d");
  if (out.h < 1 || out.w < 1)
    throw std::invalid_argument("adaptive_avg_pool2d: expected output_size >= 1, got " + out.str());
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (H < 1 || W < 1)
    throw std::invalid_argument("adaptive_avg_pool2d: expected a non-empty spatial size, got input shape " +
                                shape_str(x.shape()));
  Tensor y = Tensor::empty({N, C, out.h, out.w}, x.dtype());
  TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "adaptive_avg_pool2d", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = y.data<scalar_t>();
    over_planes(N * C, H * W, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t pl = b; pl < e; ++pl)
        for (std::int64_t i = 0; i < out.h; ++i)
          for (std::int64_t j = 0; j < out.w; ++j) {
            const std::int64_t h0 = start_index(i, out.h, H), h1 = end_index(i, out.h, H);
            const std::int64_t w0 = start_index(j, out.w, W), w1 = end_index(j, out.w, W);
            scalar_t s = 0;
            for (std::int64_t h = h0; h < h1; ++h)
              for (std::int64_t w = w0; w < w1; ++w) s += xp[(pl * H + h) * W + w];
            yp[(pl * out.h + i) * out.w + j] = s / static_cast<scalar_t>((h1 - h0) * (w1 - w0));
          }
    });
  });
  if (autograd::needs_grad({&x}))
    autograd::record("adaptive_avg_pool2d", y, {x}, [N, C, H, W, out](const Tensor& gy, GradSink& gs) {
      // dx[window] += dy / window size
      Tensor dx = Tensor::zeros({N, C, H, W}, gy.dtype());
      TAPEGRAD_DISPATCH_FLOAT(gy.dtype(), "adaptive_avg_pool2d_backward", [&] {
        const scalar_t* d = gy.data<scalar_t>();
        scalar_t* o = dx.data<scalar_t>();
        over_planes(N * C, H * W, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t pl = b; pl < e; ++pl)
            for (std::int64_t i = 0; i < out.h; ++i)
              for (std::int64_t j = 0; j < out.w; ++j) {
                const std::int64_t h0 = start_index(i, out.h, H), h1 = end_index(i, out.h, H);
                const std::int64_t w0 = start_index(j, out.w, W), w1 = end_index(j, out.w, W);
                const scalar_t v = d[(pl * out.h + i) * out.w + j] / static_cast<scalar_t>((h1 - h0) * (w1 - w0));
                for (std::int64_t h = h0; h < h1; ++h)
                  for (std::int64_t w = w0; w < w1; ++w) o[(pl * H + h) * W + w] += v;
              }
        });
      });
      gs.add(0, dx);
    });
  return y;
}

}  // namespace tapegrad::layers::functional
