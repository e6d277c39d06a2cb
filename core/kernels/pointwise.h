#pragma once
// Internal: the hot element-wise loops of core/ops (ReLU, clamp, relu_clamp forward and
// backward; add, sub, mul, div of same-shape tensors or with a scalar; linear's bias rows and
// their column sums; a convolution's bias), compiled once per ISA level (core/ops/pointwise_kernels.cpp;
// core/kernels/isa_dispatch.h). The element-wise entry points here split [0, n) with
// parallel_for and run the variant isa() picks on each range (core/ops/pointwise_dispatch.cpp).
// Each loop computes exactly the expression the op's lambda did: the same values on every
// level (selects; one IEEE operation per element; column sums add the rows in order).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::kernels {

/// The operation of binary_same / binary_scalar.
enum class BinaryOp { Add, Sub, Mul, Div };

// ReLU: y = x <= 0 ? 0 : x (NaN passes); dx = x <= 0 ? 0 : dy (PyTorch's threshold_backward).
template <class T>
void relu_forward(const T* x, T* y, std::int64_t n);
template <class T>
void relu_backward(const T* dy, const T* x, T* dx, std::int64_t n);

// clamp: y = min(max(x, lo), hi) as selects (NaN passes; lo > hi gives hi);
// dx = lo <= x <= hi ? dy : 0.
template <class T>
void clamp_forward(const T* x, T* y, std::int64_t n, T lo, T hi);
template <class T>
void clamp_backward(const T* dy, const T* x, T* dx, std::int64_t n, T lo, T hi);

// relu then clamp(lo, hi), lo <= 0 <= hi: y = min(relu(x), hi) (NaN passes); dx = 0 < x <= hi ? dy : 0.
template <class T>
void relu_clamp_forward(const T* x, T* y, std::int64_t n, T hi);
template <class T>
void relu_clamp_backward(const T* dy, const T* x, T* dx, std::int64_t n, T hi);

/// out[i] = a[i] op b[i].
template <class T>
void binary_same(BinaryOp op, const T* a, const T* b, T* out, std::int64_t n);
/// out[i] = a[i] op s.
template <class T>
void binary_scalar(BinaryOp op, const T* a, T s, T* out, std::int64_t n);

/// Every row of y (rows, n) set to b (n values): linear's bias before the GEMM adds x·Wᵀ.
template <class T>
void fill_rows(T* y, const T* b, std::int64_t rows, std::int64_t n);
/// y[r, j] += b[r] for y (rows, n): a convolution's bias, one value per output plane.
template <class T>
void add_row_values(T* y, const T* b, std::int64_t rows, std::int64_t n);
/// out[o, i] = Σ_r x[o, r, i] for x viewed as (outer, R, inner), inner > 1, R >= 1: each
/// column adds its rows in order 0, 1, ..., R-1 (sum over axes, linear's bias gradient).
template <class T>
void sum_rows(const T* x, T* out, std::int64_t outer, std::int64_t R, std::int64_t inner);

// The per-ISA variants (pointwise_kernels.cpp): the element-wise ones over [b, e) of the arrays.
#define TAPEGRAD_POINTWISE_VARIANT_DECLS(ns)                                                                   \
  namespace ns {                                                                                               \
  template <class T>                                                                                           \
  void relu_forward(const T* x, T* y, std::int64_t b, std::int64_t e);                                          \
  template <class T>                                                                                           \
  void relu_backward(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e);                           \
  template <class T>                                                                                           \
  void clamp_forward(const T* x, T* y, std::int64_t b, std::int64_t e, T lo, T hi);                              \
  template <class T>                                                                                           \
  void clamp_backward(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e, T lo, T hi);               \
  template <class T>                                                                                           \
  void relu_clamp_forward(const T* x, T* y, std::int64_t b, std::int64_t e, T hi);                               \
  template <class T>                                                                                           \
  void relu_clamp_backward(const T* dy, const T* x, T* dx, std::int64_t b, std::int64_t e, T hi);                \
  template <class T>                                                                                           \
  void binary_same(BinaryOp op, const T* a, const T* bb, T* out, std::int64_t b, std::int64_t e);               \
  template <class T>                                                                                           \
  void binary_scalar(BinaryOp op, const T* a, T s, T* out, std::int64_t b, std::int64_t e);                     \
  template <class T>                                                                                           \
  void fill_rows(T* y, const T* b, std::int64_t rows, std::int64_t n);                                         \
  template <class T>                                                                                           \
  void add_row_values(T* y, const T* b, std::int64_t rows, std::int64_t n);                                    \
  template <class T>                                                                                           \
  void sum_rows(const T* x, T* out, std::int64_t outer, std::int64_t R, std::int64_t inner);                   \
  }
TAPEGRAD_ISA_FOR_EACH_VARIANT(TAPEGRAD_POINTWISE_VARIANT_DECLS)

}  // namespace tapegrad::kernels
