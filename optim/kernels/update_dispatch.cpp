// The entry points of the optimizer update and clipping kernels (update.h): parallel_for over
// the elements, each range run by the variant for the process's ISA level, looked up once
// (core/kernels/isa_dispatch.h).
#include <tapegrad/optim/kernels/update.h>

#include <tapegrad/core/parallel.h>

namespace tapegrad::optim::kernels {

template <class T>
void sgd_plain(T* w, const T* g, T neg_lr, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(sgd_plain<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(w, g, neg_lr, b, e); });
}

template <class T>
void sgd_update(T* w, const T* g, T* buf, const SgdScalars<T>& s, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(sgd_update<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(w, g, buf, s, b, e); });
}

template <class T>
void adam_update(T* w, const T* g, T* m, T* v, T* vmax, bool l2, const AdamScalars<T>& s, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(adam_update<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(w, g, m, v, vmax, l2, s, b, e); });
}

template <class T>
void clip_value(T* x, T c, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(clip_value<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, c, b, e); });
}

template <class T>
void scale_inplace(T* x, T c, std::int64_t n) {
  static const auto f = TAPEGRAD_ISA_SELECT(scale_inplace<T>);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, c, b, e); });
}

#define TAPEGRAD_OPTIM_UPDATE_INSTANTIATE(T)                                                          \
  template void sgd_plain<T>(T*, const T*, T, std::int64_t);                                          \
  template void sgd_update<T>(T*, const T*, T*, const SgdScalars<T>&, std::int64_t);                  \
  template void adam_update<T>(T*, const T*, T*, T*, T*, bool, const AdamScalars<T>&, std::int64_t);  \
  template void clip_value<T>(T*, T, std::int64_t);                                                   \
  template void scale_inplace<T>(T*, T, std::int64_t);
TAPEGRAD_OPTIM_UPDATE_INSTANTIATE(float)
TAPEGRAD_OPTIM_UPDATE_INSTANTIATE(double)
#undef TAPEGRAD_OPTIM_UPDATE_INSTANTIATE

}  // namespace tapegrad::optim::kernels
