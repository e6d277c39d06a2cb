#pragma once
// Internal: the window walk every 2-D pool shares (pooling.cpp, pool_grad_ops.cpp): the checked
// geometry, one window's extent and divisor, and the average / spread loops that are each
// other's adjoint. Plain values, no autograd.
#include <algorithm>
#include <cstdint>
#include <optional>

#include <tapegrad/core/parallel.h>
#include <tapegrad/core/shape.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/window.h>

namespace tapegrad::layers::functional::detail {

/// A pool's sizes: input (N, C, H, W), output (N, C, OH, OW), and its window.
struct PoolGeom {
  std::int64_t N, C, H, W, OH, OW;
  Size2 k, s, p, d;
  std::int64_t planes() const { return N * C; }
};

/// The geometry of a pool on an input of shape x, after every check of window.h (throws
/// std::invalid_argument "<op>: ..." naming the values). taps_inside_only: the op reads only
/// inside the input (max pooling ignores the padding), so each window needs a tap there.
PoolGeom pool_geom(const Shape& x, const char* op, Size2 k, std::optional<Size2> stride, Size2 p, Size2 d,
                   bool ceil_mode, bool taps_inside_only);

/// Checks adaptive_avg_pool2d's input shape (N, C, H >= 1, W >= 1) and output size (>= 1),
/// throwing std::invalid_argument "<op>: ..." naming the values.
void check_adaptive(const Shape& x, const char* op, Size2 out);

/// Throws std::invalid_argument "<op>: expected divisor_override != 0, got 0" (PyTorch refuses
/// a zero divisor; a negative one is allowed, as there).
void check_divisor(const char* op, std::optional<std::int64_t> divisor_override);

/// dx (shape x, zeros) with dx[n, c, idx[n, c, l]] += g[n, c, l]: max_pool2d's backward, unchecked
/// (idx holds each output's flat position in its H·W plane, as max_pool2d computed it).
Tensor max_pool2d_scatter_values(const Tensor& g, const Tensor& idx, const Shape& x);

template <class F>
void over_planes(std::int64_t planes, std::int64_t plane_size, F&& f) {
  parallel_for(planes, parallel_rows_grain(plane_size), f);
}

/// One pooling window: rows [h0, h1) step dh, columns [w0, w1) step dw, all inside the input,
/// and the divisor of an average over it.
struct Window {
  std::int64_t h0, h1, w0, w1, dh = 1, dw = 1, div = 1;
};

/// Calls f(plane, o, window(i, j)) for every output o = (plane·OH + i)·OW + j, planes split
/// over the threads.
template <class WindowOf, class F>
void walk_windows(std::int64_t planes, std::int64_t HW, std::int64_t OH, std::int64_t OW, WindowOf window, F f) {
  over_planes(planes, HW, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl)
      for (std::int64_t i = 0; i < OH; ++i)
        for (std::int64_t j = 0; j < OW; ++j) f(pl, (pl * OH + i) * OW + j, window(i, j));
  });
}

/// y[o] = Σ window / divisor (avg and adaptive avg forward).
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

/// dx[window] += dy[o] / divisor (the adjoint of average_windows); dx zero-filled by the caller.
template <class T, class WindowOf>
void spread_windows(const T* dy, T* dx, std::int64_t planes, std::int64_t H, std::int64_t W, std::int64_t OH,
                    std::int64_t OW, WindowOf window) {
  walk_windows(planes, H * W, OH, OW, window, [&](std::int64_t pl, std::int64_t o, const Window& a) {
    const T v = dy[o] / static_cast<T>(a.div);
    for (std::int64_t h = a.h0; h < a.h1; ++h)
      for (std::int64_t w = a.w0; w < a.w1; ++w) dx[(pl * H + h) * W + w] += v;
  });
}

/// avg_pool2d's window and its divisor (PyTorch's avg_pool2d CPU rule): divisor_override when
/// given, else the window clipped to the padded input (count_include_pad) or to the input.
inline Window avg_window(const PoolGeom& g, std::int64_t i, std::int64_t j, bool count_include_pad,
                         std::optional<std::int64_t> divisor_override = std::nullopt) {
  std::int64_t h0 = i * g.s.h - g.p.h, w0 = j * g.s.w - g.p.w;
  std::int64_t h1 = std::min(h0 + g.k.h, g.H + g.p.h), w1 = std::min(w0 + g.k.w, g.W + g.p.w);
  const std::int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, g.H);
  w1 = std::min(w1, g.W);
  const std::int64_t div = count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, 1, 1, divisor_override.value_or(div)};
}

/// adaptive_avg_pool2d's window [floor(i·H/OH), ceil((i+1)·H/OH)) × (the same for W).
inline Window adaptive_window(std::int64_t i, std::int64_t j, std::int64_t H, std::int64_t W, Size2 out) {
  auto start = [](std::int64_t o, std::int64_t n, std::int64_t in) { return (o * in) / n; };
  auto end = [](std::int64_t o, std::int64_t n, std::int64_t in) { return ((o + 1) * in + n - 1) / n; };
  Window a{start(i, out.h, H), end(i, out.h, H), start(j, out.w, W), end(j, out.w, W)};
  a.div = (a.h1 - a.h0) * (a.w1 - a.w0);
  return a;
}

}  // namespace tapegrad::layers::functional::detail
