#pragma once
// Internal: the optimizers' element-wise updates and the gradient clipping loops, compiled
// once per ISA level (update.cpp; core/kernels/isa_dispatch.h). The entry points split
// [0, n) with parallel_for and run the variant isa() picks on each range (update_dispatch.cpp).
// Each loop is the expression the optimizer computed before, so a level computes the bits a
// build compiled for that level does (the same contraction of a·b + c into FMA).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

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

/// w[i] += neg_lr·g[i] (plain SGD, no momentum, weight decay nor maximize).
template <class T>
void sgd_plain(T* w, const T* g, T neg_lr, std::int64_t n);
/// SGD with the options in s; buf is the momentum buffer, or null without momentum.
template <class T>
void sgd_update(T* w, const T* g, T* buf, const SgdScalars<T>& s, std::int64_t n);
/// Adam/AdamW: m, v the moment estimates, vmax the amsgrad maximum (or null), l2 whether the
/// weight decay is added to the gradient (Adam's, not AdamW's).
template <class T>
void adam_update(T* w, const T* g, T* m, T* v, T* vmax, bool l2, const AdamScalars<T>& s, std::int64_t n);
/// x[i] = clamp(x[i], -c, c) as selects (NaN stays NaN): clip_grad_value_.
template <class T>
void clip_value(T* x, T c, std::int64_t n);
/// x[i] *= c: clip_grad_norm_'s scaling.
template <class T>
void scale_inplace(T* x, T c, std::int64_t n);

// The per-ISA variants over [b, e) (update.cpp).
#define TAPEGRAD_OPTIM_UPDATE_VARIANT_DECLS(ns)                                                                  \
  namespace ns {                                                                                                 \
  template <class T>                                                                                             \
  void sgd_plain(T* w, const T* g, T neg_lr, std::int64_t b, std::int64_t e);                                    \
  template <class T>                                                                                             \
  void sgd_update(T* w, const T* g, T* buf, const SgdScalars<T>& s, std::int64_t b, std::int64_t e);             \
  template <class T>                                                                                             \
  void adam_update(T* w, const T* g, T* m, T* v, T* vmax, bool l2, const AdamScalars<T>& s, std::int64_t b,      \
                   std::int64_t e);                                                                              \
  template <class T>                                                                                             \
  void clip_value(T* x, T c, std::int64_t b, std::int64_t e);                                                    \
  template <class T>                                                                                             \
  void scale_inplace(T* x, T c, std::int64_t b, std::int64_t e);                                                 \
  }
TAPEGRAD_ISA_FOR_EACH_VARIANT(TAPEGRAD_OPTIM_UPDATE_VARIANT_DECLS)

}  // namespace tapegrad::optim::kernels
