// The element-wise kernel family of core/kernels/pointwise.h, compiled once per ISA level (every
// file of core/kernels/cpu/: tapegrad_add_isa_variant_folder in core/CMakeLists.txt), and its
// table for this level. Forward and backward of each op side by side.
#include <tapegrad/core/kernels/pointwise.h>

#include <tapegrad/core/ops/reduce.h>

namespace tapegrad::kernels::TAPEGRAD_ISA_NS {
namespace {

// out[i] = f(x[i]) over [b, e); four vectors an iteration: fewer loop instructions.
template <class T, class F>
inline void map1(const T* __restrict x, T* __restrict y, std::int64_t b, std::int64_t e, F f) {
#pragma GCC unroll 4
  for (std::int64_t i = b; i < e; ++i) y[i] = f(x[i]);
}

// out[i] = f(x[i], y[i]) over [b, e).
template <class T, class F>
inline void map2(const T* __restrict x, const T* __restrict y, T* __restrict out, std::int64_t b, std::int64_t e, F f) {
#pragma GCC unroll 4
  for (std::int64_t i = b; i < e; ++i) out[i] = f(x[i], y[i]);
}

}  // namespace

template <class T>
void relu_forward(const T* x, T* y, std::int64_t b, std::int64_t e) {
  map1(x, y, b, e, [](T v) { return v <= T(0) ? T(0) : v; });
}
template <class T>
void relu_backward(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e) {
  map2(dy, x, dx, b, e, [](T gv, T xv) { return xv <= T(0) ? T(0) : gv; });
}

template <class T>
void clamp_forward(const T* x, T* y, std::int64_t b, std::int64_t e, T lo, T hi) {
  map1(x, y, b, e, [lo, hi](T v) {
    const T a = v < lo ? lo : v;
    return a > hi ? hi : a;
  });
}
template <class T>
void clamp_backward(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e, T lo, T hi) {
  // both comparisons always evaluated (no branch), so the loop vectorises
  map2(dy, x, dx, b, e, [lo, hi](T gv, T xv) { return ((xv >= lo) & (xv <= hi)) ? gv : T(0); });
}

template <class T>
void relu_clamp_forward(const T* x, T* y, std::int64_t b, std::int64_t e, T hi) {
  map1(x, y, b, e, [hi](T v) {
    const T r = v <= T(0) ? T(0) : v;
    return r > hi ? hi : r;
  });
}
template <class T>
void relu_clamp_backward(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e, T hi) {
  map2(dy, x, dx, b, e, [hi](T gv, T xv) { return ((xv > T(0)) & (xv <= hi)) ? gv : T(0); });
}

template <class T>
void binary_same(BinaryOp op, const T* a, const T* bb, T* out, std::int64_t b, std::int64_t e) {
  switch (op) {
    case BinaryOp::Add: return map2(a, bb, out, b, e, [](T x, T y) { return x + y; });
    case BinaryOp::Sub: return map2(a, bb, out, b, e, [](T x, T y) { return x - y; });
    case BinaryOp::Mul: return map2(a, bb, out, b, e, [](T x, T y) { return x * y; });
    case BinaryOp::Div: return map2(a, bb, out, b, e, [](T x, T y) { return x / y; });
  }
}
template <class T>
void binary_scalar(BinaryOp op, const T* a, T s, T* out, std::int64_t b, std::int64_t e) {
  switch (op) {
    case BinaryOp::Add: return map1(a, out, b, e, [s](T x) { return x + s; });
    case BinaryOp::Sub: return map1(a, out, b, e, [s](T x) { return x - s; });
    case BinaryOp::Mul: return map1(a, out, b, e, [s](T x) { return x * s; });
    case BinaryOp::Div: return map1(a, out, b, e, [s](T x) { return x / s; });
  }
}

// Short rows are written in one loop over rows and columns: a copy call per row (what the
// compiler makes of a per-row loop) cost 2-3% of the chapter's workload at rows of 32-128 floats.
template <class T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void fill_rows(T* y, const T* b, std::int64_t rows,
                                                                             std::int64_t n) {
  T* __restrict yr = y;
  const T* __restrict br = b;
  if (n * static_cast<std::int64_t>(sizeof(T)) > 1024) {
    for (std::int64_t r = 0; r < rows; ++r)
      __builtin_memcpy(yr + r * n, br, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r, yr += n)
    for (std::int64_t j = 0; j < n; ++j) yr[j] = br[j];
}

template <class T>
void add_row_values(T* y, const T* b, std::int64_t rows, std::int64_t n) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T* __restrict o = y + r * n;
    const T bv = b[r];
    for (std::int64_t j = 0; j < n; ++j) o[j] += bv;
  }
}

// Blocks of W columns are summed over the rows in registers (each column still adds its rows
// in order 0, 1, ..., R-1), the rest of a row in place.
template <class T>
void sum_rows(const T* x, T* out, std::int64_t outer, std::int64_t R, std::int64_t inner) {
  constexpr std::int64_t W = detail::kSumColumnBlockBytes / static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t b = 0; b < outer; ++b) {
    T* __restrict o = out + b * inner;
    const T* __restrict xb = x + b * R * inner;
    std::int64_t i0 = 0;
    for (; i0 + W <= inner; i0 += W) {
      T acc[W];
      for (std::int64_t j = 0; j < W; ++j) acc[j] = xb[i0 + j];
      for (std::int64_t r = 1; r < R; ++r) {
        const T* row = xb + r * inner + i0;
        for (std::int64_t j = 0; j < W; ++j) acc[j] += row[j];
      }
      for (std::int64_t j = 0; j < W; ++j) o[i0 + j] = acc[j];
    }
    if (i0 == inner) continue;
    __builtin_memcpy(o + i0, xb + i0, sizeof(T) * static_cast<std::size_t>(inner - i0));
    for (std::int64_t r = 1; r < R; ++r) {
      const T* row = xb + r * inner;
      for (std::int64_t i = i0; i < inner; ++i) o[i] += row[i];
    }
  }
}

TAPEGRAD_REGISTER_KERNELS(PointwiseKernels, pointwise, .relu_forward = &relu_forward<T>,
                          .relu_backward = &relu_backward<T>, .clamp_forward = &clamp_forward<T>,
                          .clamp_backward = &clamp_backward<T>, .relu_clamp_forward = &relu_clamp_forward<T>,
                          .relu_clamp_backward = &relu_clamp_backward<T>, .binary_same = &binary_same<T>,
                          .binary_scalar = &binary_scalar<T>, .fill_rows = &fill_rows<T>,
                          .add_row_values = &add_row_values<T>, .sum_rows = &sum_rows<T>)

}  // namespace tapegrad::kernels::TAPEGRAD_ISA_NS
