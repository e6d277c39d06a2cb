// The registered tables of the norm and pooling kernel families (layers/functional/kernels/
// batch_norm_nc.h, layer_norm_rows.h, max_pool_2x2.h; variants in kernels/cpu/): every level
// this build carries and the CPU runs, called directly through its table, against float64
// references computed here, in float32 and float64, at channel counts with and without a vector
// tail and on both sides of the (N, C) kernels' cache-residency threshold
// (thresholds::bn_rows_cached). The (N, C, S) family has its own test (test_isa_batch_norm_ncs.cpp).
#include "isa_variants_support.h"
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <tapegrad/core/isa.h>
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>
#include <tapegrad/layers/functional/kernels/layer_norm_rows.h>
#include <tapegrad/layers/functional/kernels/max_pool_2x2.h>

using namespace tapegrad;
namespace fk = tapegrad::layers::functional::kernels;

namespace {

template <class T>
std::vector<T> wave(std::size_t n, double f, double scale, double offset) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(std::sin(f * double(i)) * scale + 0.01 * double(i % 7) + offset);
  return v;
}

template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

// bn_rows_forward and bn_rows_backward of one level against float64, x and dy (N, C).
template <class T>
void check_bn_rows(Isa level, const fk::BnRowsForwardKernels<T>& f, const fk::BnRowsBackwardKernels<T>& b,
                   std::int64_t N, std::int64_t C) {
  INFO(isa_name(level) << ", " << (sizeof(T) == 4 ? "float32" : "float64") << ", N " << N << ", C " << C);
  const std::size_t M = static_cast<std::size_t>(N * C), Cs = static_cast<std::size_t>(C);
  const std::vector<T> x = wave<T>(M, 0.37, 3.0, 5.0), g = wave<T>(M, 0.19, 1.0, -0.2);
  std::vector<double> mean(Cs), var(Cs);
  f.moments(x.data(), N, C, mean.data(), var.data());
  std::vector<T> mu(Cs), a(Cs), bb(Cs), k2(Cs), k3(Cs);
  for (std::int64_t c = 0; c < C; ++c) {
    const auto [m, v] = test::mean_var(x.data() + c, N, C);
    const std::size_t ci = static_cast<std::size_t>(c);
    CHECK(mean[ci] == Approx(m).margin(tol<T>() * 5.0));
    CHECK(var[ci] == Approx(v).epsilon(tol<T>()).margin(tol<T>()));
    mu[ci] = static_cast<T>(m);
    a[ci] = static_cast<T>(1.0 / std::sqrt(v + 1e-5));
    bb[ci] = static_cast<T>(0.1 * double(c % 5) - 0.2);
    k2[ci] = static_cast<T>(0.05 * double(c % 3));
    k3[ci] = static_cast<T>(0.02 * double(c % 4) + 0.01);
  }
  const T hi = static_cast<T>(0.8);
  std::vector<T> y(M), y_act(M), pre(M), dx(M), dx_m(M);
  f.affine(x.data(), y.data(), N, C, mu.data(), a.data(), bb.data());
  f.affine_act(x.data(), y_act.data(), pre.data(), N, C, mu.data(), a.data(), bb.data(), fk::kBnActReluClamp, hi);
  b.dx(x.data(), g.data(), dx.data(), N, C, mu.data(), a.data(), k2.data(), k3.data());
  b.dx_masked(x.data(), g.data(), pre.data(), dx_m.data(), N, C, mu.data(), a.data(), k2.data(), k3.data(),
              fk::kBnActReluClamp, hi);
  std::vector<double> s1(Cs), s2(Cs), m1(Cs), m2(Cs);
  b.sums(x.data(), g.data(), N, C, mu.data(), s1.data(), s2.data());
  b.sums_masked(x.data(), g.data(), pre.data(), N, C, mu.data(), m1.data(), m2.data(), fk::kBnActReluClamp, hi);
  for (std::int64_t c = 0; c < C; ++c) {
    const std::size_t ci = static_cast<std::size_t>(c);
    double r1 = 0, r2 = 0, q1 = 0, q2 = 0, scale = 0;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::size_t i = static_cast<std::size_t>(n * C + c);
      const double xc = double(x[i]) - double(mu[ci]);
      const double v = xc * double(a[ci]) + double(bb[ci]);
      const double act = v <= 0 ? 0.0 : (v > double(hi) ? double(hi) : v);
      const bool pass = double(pre[i]) > 0 && double(pre[i]) <= double(hi);
      const double gm = pass ? double(g[i]) : 0.0;
      CHECK(double(y[i]) == Approx(v).margin(tol<T>()));
      CHECK(double(pre[i]) == Approx(v).margin(tol<T>()));
      CHECK(double(y_act[i]) == Approx(act).margin(tol<T>()));
      const double want_dx = double(a[ci]) * (double(g[i]) - double(k2[ci]) - xc * double(k3[ci]));
      CHECK(double(dx[i]) == Approx(want_dx).margin(tol<T>()));
      CHECK(double(dx_m[i]) == Approx(double(a[ci]) * (gm - double(k2[ci]) - xc * double(k3[ci]))).margin(tol<T>()));
      r1 += double(g[i]), r2 += double(g[i]) * xc, q1 += gm, q2 += gm * xc;
      scale += std::abs(double(g[i]) * xc);
    }
    const double m = tol<T>() * (scale + double(N));
    CHECK(s1[ci] == Approx(r1).margin(m));
    CHECK(s2[ci] == Approx(r2).margin(m));
    CHECK(m1[ci] == Approx(q1).margin(m));
    CHECK(m2[ci] == Approx(q2).margin(m));
  }
}

// ln_rows of one level against float64: R rows of K values, one group (LayerNorm).
template <class T>
void check_ln_rows(Isa level, const fk::LnRowsKernels<T>& k, std::int64_t R, std::int64_t K) {
  INFO(isa_name(level) << ", " << (sizeof(T) == 4 ? "float32" : "float64") << ", R " << R << ", K " << K);
  const std::size_t M = static_cast<std::size_t>(R * K), Ks = static_cast<std::size_t>(K);
  const std::vector<T> x = wave<T>(M, 0.37, 3.0, 5.0), g = wave<T>(M, 0.19, 1.0, -0.2);
  const std::vector<T> w = wave<T>(Ks, 0.7, 0.3, 1.0), bias = wave<T>(Ks, 0.3, 0.2, 0.0);
  std::vector<T> y(M), gx(M);
  std::vector<double> mean(static_cast<std::size_t>(R)), rstd(mean), var(mean), dw(Ks), db(Ks);
  const double eps = 1e-5;
  k.forward(x.data(), y.data(), R, K, 1, w.data(), bias.data(), eps, mean.data(), rstd.data(), var.data());
  k.backward(g.data(), x.data(), gx.data(), R, K, 1, w.data(), mean.data(), rstd.data(), dw.data(), db.data());
  std::vector<double> rdw(Ks, 0.0), rdb(Ks, 0.0);
  for (std::int64_t r = 0; r < R; ++r) {
    const auto [m, v] = test::mean_var(x.data() + r * K, K, 1);
    const double rs = 1.0 / std::sqrt(v + eps);
    CHECK(mean[static_cast<std::size_t>(r)] == Approx(m).margin(tol<T>() * 5.0));
    CHECK(var[static_cast<std::size_t>(r)] == Approx(v).epsilon(tol<T>()).margin(tol<T>()));
    CHECK(rstd[static_cast<std::size_t>(r)] == Approx(rs).epsilon(tol<T>() * 5.0));
    double mg = 0, mgx = 0;
    for (std::int64_t j = 0; j < K; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * K + j), ji = static_cast<std::size_t>(j);
      const double xh = (double(x[i]) - m) * rs;
      CHECK(double(y[i]) == Approx(xh * double(w[ji]) + double(bias[ji])).margin(tol<T>() * 5.0));
      const double gh = double(g[i]) * double(w[ji]);
      mg += gh, mgx += gh * xh;
      rdw[ji] += double(g[i]) * xh, rdb[ji] += double(g[i]);
    }
    mg /= double(K), mgx /= double(K);
    for (std::int64_t j = 0; j < K; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * K + j), ji = static_cast<std::size_t>(j);
      const double xh = (double(x[i]) - m) * rs;
      CHECK(double(gx[i]) == Approx(rs * (double(g[i]) * double(w[ji]) - mg - xh * mgx)).margin(tol<T>() * 5.0));
    }
  }
  for (std::size_t j = 0; j < Ks; ++j) {
    CHECK(dw[j] == Approx(rdw[j]).margin(tol<T>() * double(R) * 5.0));
    CHECK(db[j] == Approx(rdb[j]).margin(tol<T>() * double(R) * 5.0));
  }
}

// max_pool_2x2 of one level: the maxima are exact, the indices PyTorch's (first maximum in
// row-major order; NaN wins), on planes [1, P) of P planes (plane 0 stays untouched).
template <class T>
void check_max_pool(Isa level, const fk::MaxPool2x2Kernels<T>& k, std::int64_t H, std::int64_t W) {
  INFO(isa_name(level) << ", " << (sizeof(T) == 4 ? "float32" : "float64") << ", H " << H << ", W " << W);
  const std::int64_t P = 3, OH = H / 2, OW = W / 2, L = OH * OW;
  std::vector<T> x = wave<T>(static_cast<std::size_t>(P * H * W), 0.91, 2.0, 0.0);
  for (std::size_t i = 0; i < x.size(); i += 5) x[i] = x[i + 1 < x.size() ? i + 1 : i];  // ties
  x[static_cast<std::size_t>(H * W + W + 1)] = static_cast<T>(NAN);
  std::vector<T> y(static_cast<std::size_t>(P * L), T(-7));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(P * L), -7);
  k.planes(x.data(), y.data(), idx.data(), 1, P, H, W, OH, OW);
  for (std::int64_t i = 0; i < L; ++i) {
    CHECK(y[static_cast<std::size_t>(i)] == T(-7));
    CHECK(idx[static_cast<std::size_t>(i)] == -7);
  }
  for (std::int64_t p = 1; p < P; ++p)
    for (std::int64_t i = 0; i < OH; ++i)
      for (std::int64_t j = 0; j < OW; ++j) {
        std::int64_t best = 2 * i * W + 2 * j;
        for (std::int64_t q : {2 * i * W + 2 * j + 1, (2 * i + 1) * W + 2 * j, (2 * i + 1) * W + 2 * j + 1}) {
          const T v = x[static_cast<std::size_t>(p * H * W + q)], m = x[static_cast<std::size_t>(p * H * W + best)];
          if (v > m || v != v) best = q;
        }
        const std::size_t o = static_cast<std::size_t>(p * L + i * OW + j);
        const T want = x[static_cast<std::size_t>(p * H * W + best)];
        if (want != want)
          CHECK(y[o] != y[o]);
        else
          CHECK(y[o] == want);
        CHECK(idx[o] == best);
      }
}

template <class T>
void check_all_levels() {
  const auto fwd = test::runnable_on_this_cpu(TAPEGRAD_KERNEL_LEVELS(fk, bn_rows_forward, T));
  const auto bwd = test::runnable_on_this_cpu(TAPEGRAD_KERNEL_LEVELS(fk, bn_rows_backward, T));
  const auto ln = test::runnable_on_this_cpu(TAPEGRAD_KERNEL_LEVELS(fk, ln_rows, T));
  const auto mp = test::runnable_on_this_cpu(TAPEGRAD_KERNEL_LEVELS(fk, max_pool_2x2, T));
  REQUIRE(!fwd.empty());
  REQUIRE(fwd.size() == bwd.size());
  REQUIRE(fwd.size() == ln.size());
  REQUIRE(fwd.size() == mp.size());
  // The level isa() chose is one of them, and its table is the one the entry points use.
  bool chosen = false;
  for (const auto& lv : fwd) chosen = chosen || (lv.level == isa() && lv.table == &fk::bn_rows_forward<T>());
  CHECK(chosen);
  // (N, C) pairs: tails of 1-3 channels past whole vectors and of a chunk; the last one's
  // operand (4096·67 values) is past thresholds::bn_rows_cached in float32 and float64.
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{37, 7}, {37, 16}, {5, 67}, {300, 64}, {4096, 67}};
  for (std::size_t l = 0; l < fwd.size(); ++l) {
    REQUIRE(bwd[l].level == fwd[l].level);
    for (const auto& [N, C] : sizes) check_bn_rows<T>(fwd[l].level, *fwd[l].table, *bwd[l].table, N, C);
    for (const auto& [R, K] : {std::pair<std::int64_t, std::int64_t>{9, 7}, {5, 67}, {33, 256}})
      check_ln_rows<T>(ln[l].level, *ln[l].table, R, K);
    for (const auto& [H, W] : {std::pair<std::int64_t, std::int64_t>{4, 6}, {7, 34}, {9, 66}})
      check_max_pool<T>(mp[l].level, *mp[l].table, H, W);
  }
}

}  // namespace

TEST_CASE("isa: every registered table of the norm and pooling kernels agrees with float64", "[isa]") {
  check_all_levels<float>();
  check_all_levels<double>();
}

TEST_CASE("isa: each kernel family registers one table per level the build carries", "[isa]") {
  const auto levels = TAPEGRAD_KERNEL_LEVELS(fk, bn_rows_forward, float);
#if TAPEGRAD_ISA_PORTABLE
  REQUIRE(levels.size() == 3);
  CHECK(levels[0].level == Isa::Baseline);
  CHECK(levels[1].level == Isa::Avx2);
  CHECK(levels[2].level == Isa::Avx512);
  // distinct tables whose kernels are distinct functions
  CHECK(levels[0].table->moments != levels[1].table->moments);
  CHECK(levels[1].table->moments != levels[2].table->moments);
#else
  REQUIRE(levels.size() == 1);
  CHECK(levels[0].table == &fk::bn_rows_forward<float>());
#endif
  for (const auto& lv : levels) {
    CHECK(lv.table->moments != nullptr);
    CHECK(lv.table->affine != nullptr);
    CHECK(lv.table->affine_act != nullptr);
  }
}
