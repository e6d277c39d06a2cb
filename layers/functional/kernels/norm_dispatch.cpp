// The entry points of the norm kernels (batch_norm_nc.h, batch_norm_ncs.h, layer_norm_rows.h): each calls the
// variant for the process's ISA level, looked up once (core/kernels/isa_dispatch.h).
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>
#include <tapegrad/layers/functional/kernels/batch_norm_ncs.h>
#include <tapegrad/layers/functional/kernels/layer_norm_rows.h>

namespace tapegrad::layers::functional::kernels {

template <class T>
void bn_rows_moments(const T* x, std::int64_t N, std::int64_t C, double* mean, double* var) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_moments<T>);
  f(x, N, C, mean, var);
}

template <class T>
void bn_rows_affine(const T* x, T* y, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_affine<T>);
  f(x, y, N, C, mu, a, b);
}

template <class T>
void bn_rows_sums(const T* x, const T* dy, std::int64_t N, std::int64_t C, const T* mu, double* s1, double* s2) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_sums<T>);
  f(x, dy, N, C, mu, s1, s2);
}

template <class T>
void bn_rows_dx(const T* x, const T* dy, T* dx, std::int64_t N, std::int64_t C, const T* mu, const T* k1, const T* k2,
                const T* k3) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_dx<T>);
  f(x, dy, dx, N, C, mu, k1, k2, k3);
}

template <class T>
void bn_rows_affine_act(const T* x, T* y, T* pre, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b,
                        int act, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_affine_act<T>);
  f(x, y, pre, N, C, mu, a, b, act, hi);
}

template <class T>
void bn_rows_sums_masked(const T* x, const T* dy, const T* m, std::int64_t N, std::int64_t C, const T* mu, double* s1,
                         double* s2, int act, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_sums_masked<T>);
  f(x, dy, m, N, C, mu, s1, s2, act, hi);
}

template <class T>
void bn_rows_dx_masked(const T* x, const T* dy, const T* m, T* dx, std::int64_t N, std::int64_t C, const T* mu,
                       const T* k1, const T* k2, const T* k3, int act, T hi) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_rows_dx_masked<T>);
  f(x, dy, m, dx, N, C, mu, k1, k2, k3, act, hi);
}

template <class T>
void ln_rows_forward(const T* x, T* y, std::int64_t R, std::int64_t K, std::int64_t G, const T* w, const T* b,
                     double eps, double* mean, double* rstd, double* var) {
  static const auto f = TAPEGRAD_ISA_SELECT(ln_rows_forward<T>);
  f(x, y, R, K, G, w, b, eps, mean, rstd, var);
}

template <class T>
void ln_rows_backward(const T* dy, const T* x, T* gx, std::int64_t R, std::int64_t K, std::int64_t G, const T* w,
                      const double* mean, const double* rstd, double* dw, double* db) {
  static const auto f = TAPEGRAD_ISA_SELECT(ln_rows_backward<T>);
  f(dy, x, gx, R, K, G, w, mean, rstd, dw, db);
}

template <class T>
void bn_ncs_moments(const T* x, std::int64_t N, std::int64_t C, std::int64_t S, std::int64_t c0, std::int64_t c1,
                    double* mean, double* m2) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_ncs_moments<T>);
  f(x, N, C, S, c0, c1, mean, m2);
}

template <class T>
void bn_ncs_sums(const T* x, const T* dy, std::int64_t N, std::int64_t C, std::int64_t S, const double* mu,
                 std::int64_t c0, std::int64_t c1, double* s1, double* s2) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_ncs_sums<T>);
  f(x, dy, N, C, S, mu, c0, c1, s1, s2);
}

template <class T>
void bn_ncs_affine(const T* x, T* y, std::int64_t C, std::int64_t S, std::int64_t r0, std::int64_t r1, const T* mu,
                   const T* a, const T* b, bool stream) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_ncs_affine<T>);
  f(x, y, C, S, r0, r1, mu, a, b, stream);
}

template <class T>
void bn_ncs_dx(const T* x, const T* dy, T* dx, std::int64_t C, std::int64_t S, std::int64_t r0, std::int64_t r1,
               const T* mu, const T* k1, const T* k2, const T* k3, bool stream) {
  static const auto f = TAPEGRAD_ISA_SELECT(bn_ncs_dx<T>);
  f(x, dy, dx, C, S, r0, r1, mu, k1, k2, k3, stream);
}

#define TAPEGRAD_NORM_DISPATCH_INSTANTIATE(T)                                                                         \
  template void bn_rows_moments<T>(const T*, std::int64_t, std::int64_t, double*, double*);                           \
  template void bn_rows_affine<T>(const T*, T*, std::int64_t, std::int64_t, const T*, const T*, const T*);            \
  template void bn_rows_sums<T>(const T*, const T*, std::int64_t, std::int64_t, const T*, double*, double*);          \
  template void bn_rows_dx<T>(const T*, const T*, T*, std::int64_t, std::int64_t, const T*, const T*, const T*,       \
                              const T*);                                                                              \
  template void bn_rows_affine_act<T>(const T*, T*, T*, std::int64_t, std::int64_t, const T*, const T*, const T*, int, \
                                      T);                                                                             \
  template void bn_rows_sums_masked<T>(const T*, const T*, const T*, std::int64_t, std::int64_t, const T*, double*,    \
                                       double*, int, T);                                                              \
  template void bn_rows_dx_masked<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t, const T*, const T*, \
                                     const T*, const T*, int, T);                                                     \
  template void ln_rows_forward<T>(const T*, T*, std::int64_t, std::int64_t, std::int64_t, const T*, const T*, double, \
                                   double*, double*, double*);                                                        \
  template void ln_rows_backward<T>(const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, const T*,       \
                                    const double*, const double*, double*, double*);                                  \
  template void bn_ncs_moments<T>(const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,     \
                                  double*, double*);                                                                  \
  template void bn_ncs_sums<T>(const T*, const T*, std::int64_t, std::int64_t, std::int64_t, const double*,           \
                               std::int64_t, std::int64_t, double*, double*);                                         \
  template void bn_ncs_affine<T>(const T*, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*,      \
                                 const T*, const T*, bool);                                                           \
  template void bn_ncs_dx<T>(const T*, const T*, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,          \
                             const T*, const T*, const T*, const T*, bool);
TAPEGRAD_NORM_DISPATCH_INSTANTIATE(float)
TAPEGRAD_NORM_DISPATCH_INSTANTIATE(double)

}  // namespace tapegrad::layers::functional::kernels
