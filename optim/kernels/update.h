#pragma once
// Internal: the optimizers' element-wise updates and the gradient clipping loops: one kernel
// family (core/kernels/isa_dispatch.h), its table declared here, defined once per ISA level in
// optim/kernels/cpu/update.cpp. The entry points split [0, n) with parallel_for and run the
// table isa() chose on each range.
// Each loop is the expression the optimizer computed before, so a level computes the bits a
// build compiled for that level does (the same contraction of a·b + c into FMA).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>
#include <tapegrad/core/parallel.h>

namespace tapegrad::optim::kernels {

/// SGD's per-element constants (torch.optim.SGD): d = ±g (+ wd·w); with a momentum buffer,
/// buf = first ? d : m·buf + damp·d and d = nesterov ? d + m·buf : buf; w += neg_lr·d.
template <class T>
struct SgdScalars {
  T wd, m, damp, neg_lr;
  bool maximize, weight_decay, first, nesterov;
};

/// Adam/AdamW's per-element constants (adam.cpp computes them in double, as PyTorch).
template <class T>
struct AdamScalars {
  T decay, wd, sign, b1, b2, one_b1, one_b2, neg_step, bc2, eps;
};

/// The update kernels of one ISA level, over [b, e) of the arrays.
template <class T>
struct UpdateKernels {
  /// w[i] += neg_lr·g[i] (plain SGD, no momentum, weight decay nor maximize).
  void (*sgd_plain)(T* w, const T* g, T neg_lr, std::int64_t b, std::int64_t e);
  /// SGD with the options in s; buf is the momentum buffer, or null without momentum.
  void (*sgd_update)(T* w, const T* g, T* buf, const SgdScalars<T>& s, std::int64_t b, std::int64_t e);
  /// Adam/AdamW: m, v the moment estimates, vmax the amsgrad maximum (or null), l2 whether the
  /// weight decay is added to the gradient (Adam's, not AdamW's).
  void (*adam_update)(T* w, const T* g, T* m, T* v, T* vmax, bool l2, const AdamScalars<T>& s, std::int64_t b,
                      std::int64_t e);
  /// x[i] = clamp(x[i], -c, c) as selects (NaN stays NaN): clip_grad_value_.
  void (*clip_value)(T* x, T c, std::int64_t b, std::int64_t e);
  /// x[i] *= c: clip_grad_norm_'s scaling.
  void (*scale_inplace)(T* x, T c, std::int64_t b, std::int64_t e);
};
TAPEGRAD_DECLARE_KERNELS(UpdateKernels, update)

// The entry points: the kernels over [0, n) split with parallel_for (called by the optimizers,
// never by a variant file).
template <class T>
void sgd_plain(T* w, const T* g, T neg_lr, std::int64_t n) {
  const auto f = update<T>().sgd_plain;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(w, g, neg_lr, b, e); });
}
template <class T>
void sgd_update(T* w, const T* g, T* buf, const SgdScalars<T>& s, std::int64_t n) {
  const auto f = update<T>().sgd_update;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(w, g, buf, s, b, e); });
}
template <class T>
void adam_update(T* w, const T* g, T* m, T* v, T* vmax, bool l2, const AdamScalars<T>& s, std::int64_t n) {
  const auto f = update<T>().adam_update;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(w, g, m, v, vmax, l2, s, b, e); });
}
template <class T>
void clip_value(T* x, T c, std::int64_t n) {
  const auto f = update<T>().clip_value;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, c, b, e); });
}
template <class T>
void scale_inplace(T* x, T c, std::int64_t n) {
  const auto f = update<T>().scale_inplace;
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) { f(x, c, b, e); });
}

}  // namespace tapegrad::optim::kernels
