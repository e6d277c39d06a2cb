// The optimizer update and clipping kernel family of optim/kernels/update.h, compiled once per
// ISA level (every file of optim/kernels/cpu/: tapegrad_add_isa_variant_folder in
// optim/CMakeLists.txt), and its table for this level.
#include <tapegrad/optim/kernels/update.h>

#include <cmath>

namespace tapegrad::optim::kernels::TAPEGRAD_ISA_NS {
namespace {

// One Adam/AdamW update over [b, e). decay is 1 - lr·wd for AdamW, else exactly 1; sign is
// -1 with maximize, else 1 (both multiplications are exact).
template <class T, bool kL2, bool kAmsgrad>
void adam_kernel(T* __restrict w, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                 std::int64_t b, std::int64_t e, const AdamScalars<T> s) {
  for (std::int64_t i = b; i < e; ++i) {
    T wi = w[i] * s.decay;
    T gi = s.sign * g[i];
    if constexpr (kL2) gi = gi + s.wd * wi;
    const T mi = m[i] * s.b1 + s.one_b1 * gi;
    const T vi = v[i] * s.b2 + s.one_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    T vh = vi;
    if constexpr (kAmsgrad) vh = vmax[i] = (vmax[i] < vi || vi != vi) ? vi : vmax[i];  // NaN wins, as torch.maximum
    const T denom = std::sqrt(vh) / s.bc2 + s.eps;
    w[i] = wi + s.neg_step * mi / denom;
  }
}

}  // namespace

template <class T>
void sgd_plain(T* w, const T* g, T neg_lr, std::int64_t b, std::int64_t e) {
  T* __restrict wr = w;
  const T* __restrict gr = g;
#pragma GCC unroll 4  // four vectors an iteration: fewer loop instructions
  for (std::int64_t i = b; i < e; ++i) wr[i] = wr[i] + neg_lr * gr[i];
}

template <class T>
void sgd_update(T* w, const T* g, T* buf, const SgdScalars<T>& sc, std::int64_t b, std::int64_t e) {
  const SgdScalars<T> s = sc;  // in registers, not reloaded after every store
  for (std::int64_t i = b; i < e; ++i) {
    T d = s.maximize ? -g[i] : g[i];
    if (s.weight_decay) d = d + s.wd * w[i];
    if (buf) {
      buf[i] = s.first ? d : buf[i] * s.m + s.damp * d;
      d = s.nesterov ? d + s.m * buf[i] : buf[i];
    }
    w[i] = w[i] + s.neg_lr * d;
  }
}

template <class T>
void adam_update(T* w, const T* g, T* m, T* v, T* vmax, bool l2, const AdamScalars<T>& s, std::int64_t b,
                 std::int64_t e) {
  if (l2)
    vmax ? adam_kernel<T, true, true>(w, g, m, v, vmax, b, e, s) : adam_kernel<T, true, false>(w, g, m, v, vmax, b, e, s);
  else
    vmax ? adam_kernel<T, false, true>(w, g, m, v, vmax, b, e, s) : adam_kernel<T, false, false>(w, g, m, v, vmax, b, e, s);
}

template <class T>
void clip_value(T* x, T c, std::int64_t b, std::int64_t e) {
  const T lo = -c;
  // std::clamp's result (NaN stays NaN) written as selects on the value, not references
  // into the array, so the loop vectorises
  for (std::int64_t i = b; i < e; ++i) {
    const T v = x[i];
    x[i] = v < lo ? lo : (c < v ? c : v);
  }
}

template <class T>
void scale_inplace(T* x, T c, std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) x[i] *= c;
}

TAPEGRAD_REGISTER_KERNELS(UpdateKernels, update, .sgd_plain = &sgd_plain<T>, .sgd_update = &sgd_update<T>,
                          .adam_update = &adam_update<T>, .clip_value = &clip_value<T>,
                          .scale_inplace = &scale_inplace<T>)

}  // namespace tapegrad::optim::kernels::TAPEGRAD_ISA_NS
