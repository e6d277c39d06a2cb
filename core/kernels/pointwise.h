#pragma once
// Internal: the hot element-wise loops of core/ops (ReLU, clamp, relu_clamp forward and
// backward; add, sub, mul, div of same-shape tensors or with a scalar; linear's bias rows and
// their column sums; a convolution's bias): one kernel family (core/kernels/isa_dispatch.h),
// its table declared here, defined once per ISA level in core/kernels/cpu/pointwise.cpp.
// The entry points below split [0, n) with parallel_for and run the table isa() chose on each
// range; they are called by the ops, never by a variant file.
// Each loop computes exactly the expression the op's lambda did: the same values on every
// level (selects; one IEEE operation per element; column sums add the rows in order).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>
#include <tapegrad/core/parallel.h>

namespace tapegrad::kernels {

/// The operation of binary_same / binary_scalar.
enum class BinaryOp { Add, Sub, Mul, Div };

/// The element-wise kernels of one ISA level; the element-wise ones work on [b, e) of the arrays.
template <class T>
struct PointwiseKernels {
  /// ReLU: y = x <= 0 ? 0 : x (NaN passes).
  void (*relu_forward)(const T* x, T* y, std::int64_t b, std::int64_t e);
  /// dx = x <= 0 ? 0 : dy (PyTorch's threshold_backward).
  void (*relu_backward)(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e);
  /// clamp: y = min(max(x, lo), hi) as selects (NaN passes; lo > hi gives hi).
  void (*clamp_forward)(const T* x, T* y, std::int64_t b, std::int64_t e, T lo, T hi);
  /// dx = lo <= x <= hi ? dy : 0.
  void (*clamp_backward)(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e, T lo, T hi);
  /// relu then clamp(lo, hi), lo <= 0 <= hi: y = min(relu(x), hi) (NaN passes).
  void (*relu_clamp_forward)(const T* x, T* y, std::int64_t b, std::int64_t e, T hi);
  /// dx = 0 < x <= hi ? dy : 0.
  void (*relu_clamp_backward)(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e, T hi);
  /// out[i] = a[i] op bb[i].
  void (*binary_same)(BinaryOp op, const T* a, const T* bb, T* out, std::int64_t b, std::int64_t e);
  /// out[i] = a[i] op s.
  void (*binary_scalar)(BinaryOp op, const T* a, T s, T* out, std::int64_t b, std::int64_t e);
  /// Every row of y (rows, n) set to b (n values): linear's bias before the GEMM adds x·Wᵀ.
  void (*fill_rows)(T* y, const T* b, std::int64_t rows, std::int64_t n);
  /// y[r, j] += b[r] for y (rows, n): a convolution's bias, one value per output plane.
  void (*add_row_values)(T* y, const T* b, std::int64_t rows, std::int64_t n);
  /// out[o, i] = Σ_r x[o, r, i] for x viewed as (outer, R, inner), inner > 1, R >= 1: each
  /// column adds its rows in order 0, 1, ..., R-1 (sum over axes, linear's bias gradient).
  void (*sum_rows)(const T* x, T* out, std::int64_t outer, std::int64_t R, std::int64_t inner);
};
TAPEGRAD_DECLARE_KERNELS(PointwiseKernels, pointwise)

// The entry points: the element-wise kernels over [0, n) split with parallel_for.
template <class T>
void relu_forward(const T* x, T* y, std::int64_t n) {
  const auto f = pointwise<T>().relu_forward;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, y, b, e); });
}
template <class T>
void relu_backward(const T* dy, const T* x, T* dx, std::int64_t n) {
  const auto f = pointwise<T>().relu_backward;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(dy, x, dx, b, e); });
}
template <class T>
void clamp_forward(const T* x, T* y, std::int64_t n, T lo, T hi) {
  const auto f = pointwise<T>().clamp_forward;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, y, b, e, lo, hi); });
}
template <class T>
void clamp_backward(const T* dy, const T* x, T* dx, std::int64_t n, T lo, T hi) {
  const auto f = pointwise<T>().clamp_backward;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(dy, x, dx, b, e, lo, hi); });
}
template <class T>
void relu_clamp_forward(const T* x, T* y, std::int64_t n, T hi) {
  const auto f = pointwise<T>().relu_clamp_forward;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, y, b, e, hi); });
}
template <class T>
void relu_clamp_backward(const T* dy, const T* x, T* dx, std::int64_t n, T hi) {
  const auto f = pointwise<T>().relu_clamp_backward;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(dy, x, dx, b, e, hi); });
}
template <class T>
void binary_same(BinaryOp op, const T* a, const T* bb, T* out, std::int64_t n) {
  const auto f = pointwise<T>().binary_same;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(op, a, bb, out, b, e); });
}
template <class T>
void binary_scalar(BinaryOp op, const T* a, T s, T* out, std::int64_t n) {
  const auto f = pointwise<T>().binary_scalar;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(op, a, s, out, b, e); });
}

}  // namespace tapegrad::kernels
