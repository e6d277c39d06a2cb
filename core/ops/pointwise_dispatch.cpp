// The entry points of the element-wise kernels (core/kernels/pointwise.h): parallel_for over
// the elements, each range run by the variant for the process's ISA level, looked up once
// (core/kernels/isa_dispatch.h).
#include <tapegrad/core/kernels/pointwise.h>

#include <tapegrad/core/parallel.h>

namespace tapegrad::kernels {

template <class T>
void relu_forward(const T* x, T* y, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(relu_forward<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, y, b, e); });
}
template <class T>
void relu_backward(const T* dy, const T* x, T* dx, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(relu_backward<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(dy, x, dx, b, e); });
}

template <class T>
void clamp_forward(const T* x, T* y, std::int64_t n, T lo, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(clamp_forward<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, y, b, e, lo, hi); });
}
template <class T>
void clamp_backward(const T* dy, const T* x, T* dx, std::int64_t n, T lo, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(clamp_backward<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(dy, x, dx, b, e, lo, hi); });
}

template <class T>
void relu_clamp_forward(const T* x, T* y, std::int64_t n, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(relu_clamp_forward<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, y, b, e, hi); });
}
template <class T>
void relu_clamp_backward(const T* dy, const T* x, T* dx, std::int64_t n, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(relu_clamp_backward<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(dy, x, dx, b, e, hi); });
}

template <class T>
void binary_same(BinaryOp op, const T* a, const T* bb, T* out, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(binary_same<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(op, a, bb, out, b, e); });
}
template <class T>
void binary_scalar(BinaryOp op, const T* a, T s, T* out, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(binary_scalar<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(op, a, s, out, b, e); });
}

template <class T>
void fill_rows(T* y, const T* b, std::int64_t rows, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(fill_rows<T>);
  f(y, b, rows, n);
}
template <class T>
void add_row_values(T* y, const T* b, std::int64_t rows, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(add_row_values<T>);
  f(y, b, rows, n);
}
template <class T>
void sum_rows(const T* x, T* out, std::int64_t outer, std::int64_t R, std::int64_t inner) {
  static const auto f = TAPEGRAD_ISA_SELECT(sum_rows<T>);
  f(x, out, outer, R, inner);
}

#define TAPEGRAD_POINTWISE_INSTANTIATE(T)                                                  \
  template void relu_forward<T>(const T*, T*, std::int64_t);                              \
  template void relu_backward<T>(const T*, const T*, T*, std::int64_t);                   \
  template void clamp_forward<T>(const T*, T*, std::int64_t, T, T);                       \
  template void clamp_backward<T>(const T*, const T*, T*, std::int64_t, T, T);            \
  template void relu_clamp_forward<T>(const T*, T*, std::int64_t, T);                     \
  template void relu_clamp_backward<T>(const T*, const T*, T*, std::int64_t, T);          \
  template void binary_same<T>(BinaryOp, const T*, const T*, T*, std::int64_t);           \
  template void binary_scalar<T>(BinaryOp, const T*, T, T*, std::int64_t);                \
  template void fill_rows<T>(T*, const T*, std::int64_t, std::int64_t);                   \
  template void add_row_values<T>(T*, const T*, std::int64_t, std::int64_t);              \
  template void sum_rows<T>(const T*, T*, std::int64_t, std::int64_t, std::int64_t);
TAPEGRAD_POINTWISE_INSTANTIATE(float)
TAPEGRAD_POINTWISE_INSTANTIATE(double)
#undef TAPEGRAD_POINTWISE_INSTANTIATE

}  // namespace tapegrad::kernels
