// Batch norm on both sides of every size threshold of its kernels (kernels/thresholds.h,
// core/parallel.h): BatchNorm1d on (N, C) (the fused (N, C) kernels: thread grain, statistics
// block, cache-resident walk, work chunk, streaming stores), BatchNorm1d on (N, C, L) and
// BatchNorm2d on (N, C, H, W) (the (N, C, S) loops: thread grain, statistics block, streaming
// stores through the row buffer). Output, input gradient, dγ, dβ and the running statistics,
// in train and in eval mode, float32 and float64, on 1 and 2 threads, against per-channel
// sums in long double written here.
//
// The AVX2 streaming-store bug at 24 MiB: with AVX2, y and dx of BatchNorm2d were wrong from
// 24 MiB on (kernels::stream_copy stepped 64 bytes per 32-byte store); the "streaming stores"
// cases below are that size.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

#include "thresholds_support.h"

using namespace tapegrad;
using namespace tapegrad::test::thresholds;
namespace F = tapegrad::layers::functional;
namespace TH = tapegrad::layers::functional::kernels::thresholds;

namespace {

// One batch-norm problem: x (N, C, S...) with channel c centred near 0.25·c, dy, γ near 1,
// β, and the running statistics before the call; the reference statistics in long double.
template <class T>
struct Problem {
  Shape shape;
  std::int64_t N, C, S, m;
  Tensor x, dy, w, b, rm0, rv0;
  std::vector<long double> mean, var, sdy, sdyx, abs_dy, abs_dyx;  // train: batch statistics
  std::vector<long double> sdyx_e, abs_dyx_e;                       // eval: around running_mean

  explicit Problem(const Shape& s, std::uint64_t seed) : shape(s) {
    N = s[0];
    C = s[1];
    S = 1;
    for (std::size_t d = 2; d < s.size(); ++d) S *= s[d];
    m = N * S;
    x = pattern<T>(s, seed, 1.0, C, S, 0.25);
    dy = pattern<T>(s, seed + 1);
    w = pattern<T>({C}, seed + 2, 0.25);
    b = pattern<T>({C}, seed + 3, 0.5);
    rm0 = pattern<T>({C}, seed + 4, 0.1, C, 1, 0.25);
    rv0 = pattern<T>({C}, seed + 5, 0.25);
    T* wp = w.data<T>();
    T* rvp = rv0.data<T>();
    for (std::int64_t c = 0; c < C; ++c) {
      wp[c] += T(1);
      rvp[c] = T(std::abs(rvp[c]) + 0.3);  // a variance near uniform(-1, 1)'s 1/3
    }
    reference();
  }

  void reference() {
    const std::size_t Cs = static_cast<std::size_t>(C);
    mean.assign(Cs, 0);
    var.assign(Cs, 0);
    sdy.assign(Cs, 0);
    sdyx.assign(Cs, 0);
    abs_dy.assign(Cs, 0);
    abs_dyx.assign(Cs, 0);
    sdyx_e.assign(Cs, 0);
    abs_dyx_e.assign(Cs, 0);
    const T* xp = x.data<T>();
    const T* gp = dy.data<T>();
    const T* rm = rm0.data<T>();
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c) {
        const T* xr = xp + (n * C + c) * S;
        long double s = 0;
        for (std::int64_t j = 0; j < S; ++j) s += xr[j];
        mean[c] += s;
      }
    for (auto& v : mean) v /= m;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c) {
        const T* xr = xp + (n * C + c) * S;
        const T* gr = gp + (n * C + c) * S;
        const double mu = static_cast<double>(mean[c]), me = rm[c];
        double q = 0, a = 0, ax = 0, axe = 0, aa = 0, aaxe = 0, aax = 0;  // one row in double
        for (std::int64_t j = 0; j < S; ++j) {
          const double d = xr[j] - mu, de = xr[j] - me, g = gr[j];
          q += d * d;
          a += g;
          ax += g * d;
          axe += g * de;
          aa += std::abs(g);
          aax += std::abs(g * d);
          aaxe += std::abs(g * de);
        }
        var[c] += q;
        sdy[c] += a;
        sdyx[c] += ax;
        sdyx_e[c] += axe;
        abs_dy[c] += aa;
        abs_dyx[c] += aax;
        abs_dyx_e[c] += aaxe;
      }
    for (auto& v : var) v /= m;
  }

  // Runs batch_norm forward and backward once and checks everything against the reference.
  void run_and_check(bool train) const {
    Tensor xl = x.detach().requires_grad_();
    Tensor wl = w.clone().requires_grad_();
    Tensor bl = b.clone().requires_grad_();
    Tensor rm = rm0.clone(), rv = rv0.clone();
    Tensor y = F::batch_norm(xl, rm, rv, wl, bl, train, kMomentum, kEps);
    y.backward(dy);
    const T* rmp0 = rm0.data<T>();
    const T* rvp0 = rv0.data<T>();
    std::vector<double> mu(static_cast<std::size_t>(C)), rstd(mu), k2(mu), k3(mu);
    for (std::int64_t c = 0; c < C; ++c) {
      if (train) {
        mu[c] = static_cast<double>(mean[c]);
        rstd[c] = static_cast<double>(1.0L / std::sqrt(var[c] + kEps));
        k2[c] = static_cast<double>(sdy[c] / m);
        k3[c] = static_cast<double>(sdyx[c] / m) * rstd[c] * rstd[c];
      } else {
        mu[c] = rmp0[c];
        rstd[c] = 1.0 / std::sqrt(static_cast<double>(rvp0[c]) + kEps);
        k2[c] = k3[c] = 0.0;
      }
    }
    const T* xp = x.data<T>();
    const T* gp = dy.data<T>();
    const T* wp = w.data<T>();
    const T* bp = b.data<T>();
    const T* yp = y.data<T>();
    const Tensor gx = xl.grad();
    REQUIRE(gx.defined());
    const T* dxp = gx.data<T>();
    // A branch-free count first (it vectorises: tens of millions of elements), then, only
    // when some are off, the walk through Mismatches that names the first one.
    std::int64_t bad = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t o = (n * C + c) * S;
        const double a = wp[c] * rstd[c], u = mu[c], bb = bp[c], kk2 = k2[c], kk3 = k3[c];
        for (std::int64_t j = 0; j < S; ++j) {
          const double d = xp[o + j] - u, wy = d * a + bb, wdx = a * (gp[o + j] - kk2 - d * kk3);
          bad += !(std::abs(yp[o + j] - wy) <= NormTol<T>::y * std::max(1.0, std::abs(wy)));
          bad += !(std::abs(dxp[o + j] - wdx) <= NormTol<T>::dx * std::max(1.0, std::abs(wdx)));
        }
      }
    if (bad != 0) {
      Mismatches my("y"), mdx("dx");
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c) {
          const std::int64_t o = (n * C + c) * S;
          const double a = wp[c] * rstd[c], u = mu[c], bb = bp[c], kk2 = k2[c], kk3 = k3[c];
          for (std::int64_t j = 0; j < S; ++j) {
            const double d = xp[o + j] - u;
            my.check_rel(o + j, yp[o + j], d * a + bb, NormTol<T>::y);
            mdx.check_rel(o + j, dxp[o + j], a * (gp[o + j] - kk2 - d * kk3), NormTol<T>::dx);
          }
        }
      my.require();
      mdx.require();
    }
    REQUIRE(bad == 0);
    Mismatches mw("dweight"), mb("dbias"), mrm("running_mean"), mrv("running_var");
    const T* dwp = wl.grad().data<T>();
    const T* dbp = bl.grad().data<T>();
    const T* rmp = rm.data<T>();
    const T* rvp = rv.data<T>();
    for (std::int64_t c = 0; c < C; ++c) {
      const double sx = static_cast<double>(train ? sdyx[c] : sdyx_e[c]);
      const double ax = static_cast<double>(train ? abs_dyx[c] : abs_dyx_e[c]);
      mw.check(c, dwp[c], rstd[c] * sx, NormTol<T>::sum * rstd[c] * ax + 1e-300);
      mb.check(c, dbp[c], static_cast<double>(sdy[c]), NormTol<T>::sum * static_cast<double>(abs_dy[c]) + 1e-300);
      const double want_rm = train ? (1 - kMomentum) * rmp0[c] + kMomentum * static_cast<double>(mean[c]) : rmp0[c];
      const double want_rv =
          train ? (1 - kMomentum) * rvp0[c] + kMomentum * static_cast<double>(var[c]) * m / (m - 1.0) : rvp0[c];
      mrm.check_rel(c, rmp[c], want_rm, train ? NormTol<T>::run : 0.0);
      mrv.check_rel(c, rvp[c], want_rv, train ? NormTol<T>::run : 0.0);
    }
    mw.require();
    mb.require();
    mrm.require();
    mrv.require();
  }
};

// Both modes on every thread count for one shape.
template <class T>
void check_batch_norm(const Shape& shape, std::uint64_t seed = 22) {
  ThreadsGuard guard;
  const Problem<T> p(shape, seed);
  for (bool train : {true, false})
    for (int nt : thread_counts()) {
      set_num_threads(nt);
      INFO(dtype_label<T>() << " " << shape_text(shape) << (train ? " train" : " eval") << ", " << nt
                            << " thread(s), " << numel_of(shape) * sizeof(T) << " bytes");
      p.run_and_check(train);
    }
}

}  // namespace

TEMPLATE_TEST_CASE("thresholds: BatchNorm1d (N, C), thread grain, statistics block, cached walk, work chunk",
                   "[thresholds][batchnorm]", float, double) {
  using T = TestType;
  constexpr std::int64_t C = 64;
  SECTION("kParallelGrain: N·C just below and at the grain") {
    const std::int64_t n = kParallelGrain / C;
    check_batch_norm<T>({n - 1, C});
    check_batch_norm<T>({n, C});
  }
  SECTION("statistics block: one block of rows and one row more") {
    const std::int64_t B = TH::bn_rows_block_rows(C);
    check_batch_norm<T>({B, C});
    check_batch_norm<T>({B + 1, C});
  }
  SECTION("cache-resident walk: the largest cached operand and one row more") {
    const std::int64_t n = static_cast<std::int64_t>(TH::kBnRowsCachedBytes / (C * sizeof(T)));
    REQUIRE(TH::bn_rows_cached<T>(n, C));
    REQUIRE_FALSE(TH::bn_rows_cached<T>(n + 1, C));
    check_batch_norm<T>({n, C});
    check_batch_norm<T>({n + 1, C});
  }
  SECTION("work chunks: one chunk of the statistics and one row more; the same for the backward sums") {
    const std::int64_t B = TH::bn_rows_block_rows(C);
    const std::int64_t stats = TH::chunk_rows(C * static_cast<std::int64_t>(sizeof(T)), B);
    const std::int64_t sums = TH::chunk_rows(2 * C * static_cast<std::int64_t>(sizeof(T)), B);
    check_batch_norm<T>({stats, C});
    check_batch_norm<T>({stats + 1, C});
    check_batch_norm<T>({sums, C});
    check_batch_norm<T>({sums + 1, C});
  }
}

TEMPLATE_TEST_CASE("thresholds: BatchNorm1d (N, C), streaming stores", "[thresholds][batchnorm]", float, double) {
  using T = TestType;
  constexpr std::int64_t C = 64;  // whole vectors: the (N, C) kernels stream only then
  STATIC_REQUIRE(C % static_cast<std::int64_t>(64 / sizeof(T)) == 0);  // whole 64-byte vectors: every ISA variant
  const std::int64_t n = rows_reaching(TH::kStreamBytes, C * static_cast<std::int64_t>(sizeof(T)));
  check_batch_norm<T>({n - 1, C});
  check_batch_norm<T>({n, C});
}

TEMPLATE_TEST_CASE("thresholds: BatchNorm1d (N, C, L), thread grain and statistics block", "[thresholds][batchnorm]",
                   float, double) {
  using T = TestType;
  SECTION("kParallelGrain: N·C·L just below and at the grain") {
    const std::int64_t L = kParallelGrain / 4;
    check_batch_norm<T>({2, 2, L - 1});
    check_batch_norm<T>({2, 2, L});
  }
  SECTION("statistics block: one block of rows and one row more") {
    constexpr std::int64_t L = 96;
    const std::int64_t G = TH::bn_spatial_block_rows(L);
    check_batch_norm<T>({G, 3, L});
    check_batch_norm<T>({G + 1, 3, L});
  }
}

TEMPLATE_TEST_CASE("thresholds: BatchNorm1d (N, C, L), streaming stores, rows longer than the stream buffer",
                   "[thresholds][batchnorm]", float, double) {
  using T = TestType;
  const std::int64_t L = TH::kBnStreamBufferElems + 1, C = 2;  // each row: one whole buffer and one value
  const std::int64_t n = rows_reaching(TH::kStreamBytes, C * L * static_cast<std::int64_t>(sizeof(T)));
  check_batch_norm<T>({n - 1, C, L});
  check_batch_norm<T>({n, C, L});
}

TEMPLATE_TEST_CASE("thresholds: BatchNorm2d (N, C, H, W), streaming stores", "[thresholds][batchnorm]",
                   float, double) {
  using T = TestType;
  // 28×28 planes (784 values, 3136 bytes of float32: rows start off the 64-byte grid, so the
  // streamed copy has a head and a tail) of 3 channels; N from the threshold.
  const std::int64_t C = 3, H = 28, W = 28;
  STATIC_REQUIRE(H * W <= TH::kBnStreamBufferElems);
  const std::int64_t n = rows_reaching(TH::kStreamBytes, C * H * W * static_cast<std::int64_t>(sizeof(T)));
  check_batch_norm<T>({n - 1, C, H, W});
  check_batch_norm<T>({n, C, H, W});
}
