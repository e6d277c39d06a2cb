// The optimizer updates and clipping loops compiled per ISA level (optim/kernels/update.h):
// every variant this build carries and the CPU runs, called directly, against float64
// references computed here (SGD plain, with momentum, dampening, Nesterov, weight decay,
// maximize, the first step; Adam and AdamW with and without amsgrad; clip_grad_value_'s clamp
// and clip_grad_norm_'s scaling), at lengths with and without a vector tail; then the
// dispatched entry points, on both sides of the parallel grain, give the chosen level's bits.
#include "isa_variants_support.h"
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/isa.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/optim/kernels/update.h>

using namespace tapegrad;
namespace ok = tapegrad::optim::kernels;

namespace {

// One level's registered table of the update family, with its level.
template <class T>
using UpdateVariant = tapegrad::test::LevelTable<ok::UpdateKernels<T>>;

// The levels this build carries that this CPU runs.
template <class T>
std::vector<UpdateVariant<T>> runnable_variants() {
  return tapegrad::test::runnable_tables<ok::UpdateKernels<T>>(TAPEGRAD_KERNEL_LEVELS(ok, update, T));
}

template <class T>
std::vector<T> wave(std::int64_t n, double f, double off) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<T>(std::sin(f * double(i) + off) + 0.1);
  return v;
}

template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-6 : 1e-14;
}

template <class T>
void check_sgd(const UpdateVariant<T>& k, std::int64_t n) {
  const std::vector<T> w0 = wave<T>(n, 0.7, 0.2), g = wave<T>(n, 0.45, 1.1), b0 = wave<T>(n, 0.3, 2.0);
  {
    std::vector<T> w = w0;
    k.sgd_plain(w.data(), g.data(), T(-0.05), 0, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      REQUIRE(double(w[u]) == Approx(double(w0[u]) - 0.05 * double(g[u])).margin(tol<T>()));
    }
  }
  for (int variant = 0; variant < 6; ++variant) {
    // 0 momentum; 1 first step; 2 dampening + wd; 3 nesterov; 4 maximize, no buffer; 5 all
    ok::SgdScalars<T> s{};
    s.m = T(0.9), s.damp = T(1), s.wd = T(0), s.neg_lr = T(-0.05);
    const bool buffer = variant != 4;
    s.first = variant == 1;
    if (variant == 2 || variant == 5) s.damp = T(0.75), s.wd = T(0.01), s.weight_decay = true;
    if (variant == 4) s.wd = T(0.02), s.weight_decay = true;
    s.nesterov = variant == 3 || variant == 5;
    s.maximize = variant == 4 || variant == 5;
    if (variant == 5) s.damp = T(1);  // nesterov needs zero dampening
    INFO(isa_name(k.level) << ", n " << n << ", sgd case " << variant);
    std::vector<T> w = w0, buf = b0;
    k.sgd_update(w.data(), g.data(), buffer ? buf.data() : nullptr, s, 0, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      double d = s.maximize ? -double(g[u]) : double(g[u]);
      if (s.weight_decay) d += double(s.wd) * double(w0[u]);
      if (buffer) {
        const double bb = s.first ? d : double(b0[u]) * double(s.m) + double(s.damp) * d;
        REQUIRE(double(buf[u]) == Approx(bb).margin(4 * tol<T>()));
        d = s.nesterov ? d + double(s.m) * bb : bb;
      }
      REQUIRE(double(w[u]) == Approx(double(w0[u]) + double(s.neg_lr) * d).margin(4 * tol<T>()));
    }
  }
}

template <class T>
void check_adam(const UpdateVariant<T>& k, std::int64_t n) {
  const std::vector<T> w0 = wave<T>(n, 0.7, 0.2), g = wave<T>(n, 0.45, 1.1), m0 = wave<T>(n, 0.3, 2.0);
  std::vector<T> v0 = wave<T>(n, 0.2, 0.5), vmax0 = wave<T>(n, 0.25, 0.1);
  for (auto& x : v0) x = x * x;
  for (auto& x : vmax0) x = x * x;
  for (int variant = 0; variant < 4; ++variant) {
    const bool l2 = variant & 1, ams = variant & 2;
    INFO(isa_name(k.level) << ", n " << n << ", l2 " << l2 << ", amsgrad " << ams);
    ok::AdamScalars<T> s{};
    s.decay = l2 ? T(1) : T(1 - 0.001 * 0.01), s.wd = T(0.01), s.sign = T(1), s.b1 = T(0.9), s.b2 = T(0.999);
    s.one_b1 = T(0.1), s.one_b2 = T(0.001), s.neg_step = T(-0.001 / (1 - 0.9 * 0.9)),
    s.bc2 = T(std::sqrt(1 - 0.999 * 0.999)), s.eps = T(1e-8);
    std::vector<T> w = w0, m = m0, v = v0, vmax = vmax0;
    k.adam_update(w.data(), g.data(), m.data(), v.data(), ams ? vmax.data() : nullptr, l2, s, 0, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      const double wi = double(w0[u]) * double(s.decay);
      double gi = double(g[u]);
      if (l2) gi += double(s.wd) * wi;
      const double mi = double(m0[u]) * double(s.b1) + double(s.one_b1) * gi;
      const double vi = double(v0[u]) * double(s.b2) + double(s.one_b2) * gi * gi;
      const double vh = ams ? std::max(double(vmax0[u]), vi) : vi;
      REQUIRE(double(m[u]) == Approx(mi).margin(4 * tol<T>()));
      REQUIRE(double(v[u]) == Approx(vi).margin(4 * tol<T>()));
      if (ams) REQUIRE(double(vmax[u]) == Approx(vh).margin(4 * tol<T>()));
      const double ref = wi + double(s.neg_step) * mi / (std::sqrt(vh) / double(s.bc2) + double(s.eps));
      REQUIRE(double(w[u]) == Approx(ref).margin(16 * tol<T>()));
    }
  }
}

template <class T>
void check_clip(const UpdateVariant<T>& k, std::int64_t n) {
  INFO(isa_name(k.level) << ", n " << n);
  std::vector<T> x = wave<T>(n, 0.9, 0.0);
  for (auto& v : x) v *= T(3);
  if (n > 4) x[1] = std::numeric_limits<T>::quiet_NaN(), x[2] = std::numeric_limits<T>::infinity(), x[3] = T(-0.5);
  const std::vector<T> x0 = x;
  k.clip_value(x.data(), T(0.5), 1, n);  // [1, n): x[0] untouched
  if (n > 0) REQUIRE(x[0] == x0[0]);
  for (std::int64_t i = 1; i < n; ++i) {
    const std::size_t u = static_cast<std::size_t>(i);
    if (std::isnan(x0[u]))
      REQUIRE(std::isnan(x[u]));
    else
      REQUIRE(double(x[u]) == std::min(std::max(double(x0[u]), -0.5), 0.5));
  }
  std::vector<T> y = x0;
  k.scale_inplace(y.data(), T(0.375), 0, n);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t u = static_cast<std::size_t>(i);
    if (std::isnan(x0[u]))
      REQUIRE(std::isnan(y[u]));
    else
      REQUIRE(double(y[u]) == double(static_cast<T>(double(x0[u]) * 0.375)));  // one rounding: exact
  }
}

}  // namespace

TEST_CASE("isa: the optimizer update and clipping kernels of every runnable level agree with float64", "[isa]") {
  const auto vf = runnable_variants<float>();
  const auto vd = runnable_variants<double>();
  REQUIRE(!vf.empty());
  for (std::int64_t n : {0, 1, 7, 16, 33, 100}) {
    for (const auto& k : vf) check_sgd(k, n), check_adam(k, n), check_clip(k, n);
    for (const auto& k : vd) check_sgd(k, n), check_adam(k, n), check_clip(k, n);
  }
}

TEST_CASE("isa: the dispatched update kernels give the chosen level's bits on both sides of the parallel grain",
          "[isa]") {
  const auto vf = runnable_variants<float>();
  const UpdateVariant<float>* chosen = nullptr;
  for (const auto& k : vf)
    if (k.level == isa()) chosen = &k;
  REQUIRE(chosen != nullptr);
  for (std::int64_t n : {std::int64_t(100), kParallelGrain - 1, 2 * kParallelGrain + 3}) {
    INFO("kernels at " << isa_name(isa()) << ", n " << n);
    const std::vector<float> w0 = wave<float>(n, 0.7, 0.2), g = wave<float>(n, 0.45, 1.1), b0 = wave<float>(n, 0.3, 2.0);
    ok::SgdScalars<float> s{};
    s.m = 0.9f, s.damp = 0.75f, s.wd = 0.01f, s.weight_decay = true, s.neg_lr = -0.05f;
    std::vector<float> w1 = w0, b1 = b0, w2 = w0, b2 = b0;
    ok::sgd_update<float>(w1.data(), g.data(), b1.data(), s, n);
    chosen->sgd_update(w2.data(), g.data(), b2.data(), s, 0, n);
    CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(b1.data(), b2.data(), b1.size() * sizeof(float)) == 0);
    w1 = w0, w2 = w0;
    ok::sgd_plain<float>(w1.data(), g.data(), -0.05f, n);
    chosen->sgd_plain(w2.data(), g.data(), -0.05f, 0, n);
    CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * sizeof(float)) == 0);
    ok::AdamScalars<float> a{};
    a.decay = 1.0f, a.wd = 0.0f, a.sign = 1.0f, a.b1 = 0.9f, a.b2 = 0.999f, a.one_b1 = 0.1f, a.one_b2 = 0.001f;
    a.neg_step = -0.001f, a.bc2 = 0.05f, a.eps = 1e-8f;
    std::vector<float> m1 = b0, v1 = w0, m2 = b0, v2 = w0;
    for (auto& x : v1) x *= x;
    v2 = v1, w1 = w0, w2 = w0;
    ok::adam_update<float>(w1.data(), g.data(), m1.data(), v1.data(), nullptr, false, a, n);
    chosen->adam_update(w2.data(), g.data(), m2.data(), v2.data(), nullptr, false, a, 0, n);
    CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(v1.data(), v2.data(), v1.size() * sizeof(float)) == 0);
    w1 = w0, w2 = w0;
    ok::clip_value<float>(w1.data(), 0.5f, n);
    chosen->clip_value(w2.data(), 0.5f, 0, n);
    CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * sizeof(float)) == 0);
    ok::scale_inplace<float>(w1.data(), 0.3f, n);
    chosen->scale_inplace(w2.data(), 0.3f, 0, n);
    CHECK(std::memcmp(w1.data(), w2.data(), w1.size() * sizeof(float)) == 0);
  }
}
