// LayerNorm, GroupNorm and InstanceNorm on both sides of every size threshold of their
// kernels (kernels/thresholds.h, core/parallel.h). LayerNorm and GroupNorm on (N, C) run the
// per-row kernel (kernels/cpu/layer_norm_rows.cpp: thread grain, row block, gradient block,
// paired rows, work chunks, streaming stores of dx); GroupNorm and InstanceNorm on
// (N, C, H, W) the row loops of grouped_norm.cpp (thread grain of the forward rows and of
// the backward). Output, input gradient, dγ, dβ, and InstanceNorm's running statistics and
// eval mode, float32 and float64, on 1 and 2 threads, against per-row sums in long double
// written here. LayerNorm and GroupNorm have no mode: train and eval are the same function.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/group_norm.h>
#include <tapegrad/layers/functional/instance_norm.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>
#include <tapegrad/layers/functional/layer_norm.h>

#include "thresholds_support.h"

using namespace tapegrad;
using namespace tapegrad::test::thresholds;
namespace F = tapegrad::layers::functional;
namespace TH = tapegrad::layers::functional::kernels::thresholds;

namespace {

// x read as R rows of K values; value j of row r has affine channel (r mod G)·Cg + j / S.
struct Layout {
  std::int64_t R, K, G, Cg, S;
  std::int64_t C() const { return G * Cg; }
  std::int64_t channel(std::int64_t r, std::int64_t j) const { return (r % G) * Cg + j / S; }
};

// The op under test: y from (x, weight, bias, running_mean, running_var, training).
using Op = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, bool)>;

template <class T>
struct Problem {
  Shape shape;
  Layout L;
  Tensor x, dy, w, b, rm0, rv0;
  std::vector<long double> mean, var, A, Bx;  // per row: μ, σ², Σγ·dy, Σγ·dy·(x - μ)

  Problem(const Shape& s, Layout l, std::uint64_t seed) : shape(s), L(l) {
    const std::int64_t C = L.C();
    x = pattern<T>(s, seed, 1.0, 16, L.K, 0.125);  // row r centred near 0.125·(r mod 16)
    dy = pattern<T>(s, seed + 1);
    w = pattern<T>({C}, seed + 2, 0.25);
    b = pattern<T>({C}, seed + 3, 0.5);
    rm0 = pattern<T>({C}, seed + 4, 0.1);
    rv0 = pattern<T>({C}, seed + 5, 0.25);
    for (std::int64_t c = 0; c < C; ++c) {
      w.data<T>()[c] += T(1);
      rv0.data<T>()[c] = T(std::abs(rv0.data<T>()[c]) + 0.3);
    }
    const T* xp = x.data<T>();
    const T* gp = dy.data<T>();
    const T* wp = w.data<T>();
    mean.assign(static_cast<std::size_t>(L.R), 0);
    var = A = Bx = mean;
    for (std::int64_t r = 0; r < L.R; ++r) {
      const T* xr = xp + r * L.K;
      const T* gr = gp + r * L.K;
      long double s = 0;
      for (std::int64_t j = 0; j < L.K; ++j) s += xr[j];
      const long double mu = s / L.K;
      long double q = 0, a = 0, bx = 0;
      for (std::int64_t j = 0; j < L.K; ++j) {
        const long double d = xr[j] - mu, gd = static_cast<long double>(wp[L.channel(r, j)]) * gr[j];
        q += d * d;
        a += gd;
        bx += gd * d;
      }
      mean[r] = mu;
      var[r] = q / L.K;
      A[r] = a;
      Bx[r] = bx;
    }
  }

  // The op on fresh leaves (copies of x, w, b) and fresh running statistics, in train or eval
  // mode, after its backward with dy.
  struct Run {
    Tensor x, w, b, rm, rv, y;
  };
  Run run(const Op& op, bool train) const {
    Run r{x.detach().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_(), rm0.clone(), rv0.clone(),
          Tensor()};
    r.y = op(r.x, r.w, r.b, r.rm, r.rv, train);
    r.y.backward(dy);
    return r;
  }

  // Input statistics (LayerNorm, GroupNorm, InstanceNorm in train mode): y, dx, dγ, dβ and,
  // when `running`, InstanceNorm's update of the running statistics.
  void check_input_stats(const Op& op, bool running) const {
    const std::int64_t C = L.C();
    const Run ran = run(op, true);
    const Tensor &xl = ran.x, &wl = ran.w, &bl = ran.b, &rm = ran.rm, &rv = ran.rv, &y = ran.y;
    const T *xp = x.data<T>(), *gp = dy.data<T>(), *wp = w.data<T>(), *bp = b.data<T>(), *yp = y.data<T>();
    const T* dxp = xl.grad().data<T>();
    // Per row: a branch-free count of the elements off (it vectorises), the channel sums in
    // double per row (added up in long double); Mismatches names the first bad element only
    // when there is one.
    std::vector<long double> dw(static_cast<std::size_t>(C)), db(dw), adw(dw), adb(dw);
    std::int64_t bad = 0;
    const auto row_constants = [&](std::int64_t r, double& mu, double& rs, double& c1, double& c3) {
      mu = static_cast<double>(mean[r]);
      rs = static_cast<double>(1.0L / std::sqrt(var[r] + kEps));
      c1 = static_cast<double>(A[r] / L.K);
      c3 = static_cast<double>(Bx[r] / L.K) * rs * rs;
    };
    for (std::int64_t r = 0; r < L.R; ++r) {
      double mu, rs, c1, c3;
      row_constants(r, mu, rs, c1, c3);
      const std::int64_t c0 = (r % L.G) * L.Cg;
      for (std::int64_t cc = 0; cc < L.Cg; ++cc) {  // one affine channel: S values
        const std::int64_t c = c0 + cc, i0 = r * L.K + cc * L.S;
        const double wc = wp[c], bc = bp[c];
        double sw = 0, sb = 0, aw = 0, ab = 0;
        for (std::int64_t s = 0; s < L.S; ++s) {
          const std::int64_t i = i0 + s;
          const double d = xp[i] - mu, xh = d * rs, g = gp[i];
          const double wy = xh * wc + bc, wdx = rs * (wc * g - c1 - d * c3);
          bad += !(std::abs(yp[i] - wy) <= NormTol<T>::y * std::max(1.0, std::abs(wy)));
          bad += !(std::abs(dxp[i] - wdx) <= NormTol<T>::dx * std::max(1.0, std::abs(wdx)));
          sw += g * xh;
          sb += g;
          aw += std::abs(g * xh);
          ab += std::abs(g);
        }
        dw[c] += sw;
        db[c] += sb;
        adw[c] += aw;
        adb[c] += ab;
      }
    }
    if (bad != 0) {
      Mismatches my("y"), mdx("dx");
      for (std::int64_t r = 0; r < L.R; ++r) {
        double mu, rs, c1, c3;
        row_constants(r, mu, rs, c1, c3);
        for (std::int64_t j = 0; j < L.K; ++j) {
          const std::int64_t i = r * L.K + j, c = L.channel(r, j);
          const double d = xp[i] - mu, xh = d * rs, g = gp[i];
          my.check_rel(i, yp[i], xh * wp[c] + bp[c], NormTol<T>::y);
          mdx.check_rel(i, dxp[i], rs * (wp[c] * g - c1 - d * c3), NormTol<T>::dx);
        }
      }
      my.require();
      mdx.require();
    }
    REQUIRE(bad == 0);
    Mismatches mw("dweight"), mb("dbias");
    const T *dwp = wl.grad().data<T>(), *dbp = bl.grad().data<T>();
    for (std::int64_t c = 0; c < C; ++c) {
      mw.check(c, dwp[c], static_cast<double>(dw[c]), NormTol<T>::sum * static_cast<double>(adw[c]) + 1e-300);
      mb.check(c, dbp[c], static_cast<double>(db[c]), NormTol<T>::sum * static_cast<double>(adb[c]) + 1e-300);
    }
    mw.require();
    mb.require();
    if (!running) return;
    // InstanceNorm (G = C, one row per (n, c)): run = (1 - m)·run + m·mean_n(stat[n, c])
    Mismatches mrm("running_mean"), mrv("running_var");
    const std::int64_t N = L.R / C;
    for (std::int64_t c = 0; c < C; ++c) {
      long double sm = 0, sv = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        sm += mean[n * C + c];
        sv += var[n * C + c] * L.K / (L.K - 1.0L);
      }
      const double want_m = (1 - kMomentum) * rm0.data<T>()[c] + kMomentum * static_cast<double>(sm / N);
      const double want_v = (1 - kMomentum) * rv0.data<T>()[c] + kMomentum * static_cast<double>(sv / N);
      mrm.check_rel(c, rm.data<T>()[c], want_m, NormTol<T>::run);
      mrv.check_rel(c, rv.data<T>()[c], want_v, NormTol<T>::run);
    }
    mrm.require();
    mrv.require();
  }

  // InstanceNorm in eval mode: the running statistics, per channel (batch norm's eval form).
  void check_running_stats(const Op& op) const {
    const std::int64_t C = L.C();
    const Run ran = run(op, false);
    const Tensor &xl = ran.x, &wl = ran.w, &bl = ran.b, &rm = ran.rm, &rv = ran.rv, &y = ran.y;
    const T *xp = x.data<T>(), *gp = dy.data<T>(), *wp = w.data<T>(), *bp = b.data<T>(), *yp = y.data<T>();
    const T *rmp = rm0.data<T>(), *rvp = rv0.data<T>();
    const T* dxp = xl.grad().data<T>();
    std::vector<long double> dw(static_cast<std::size_t>(C)), db(dw), adw(dw), adb(dw);
    Mismatches my("y (eval)"), mdx("dx (eval)");
    for (std::int64_t r = 0; r < L.R; ++r)
      for (std::int64_t j = 0; j < L.K; ++j) {
        const std::int64_t i = r * L.K + j, c = L.channel(r, j);
        const double rs = 1.0 / std::sqrt(static_cast<double>(rvp[c]) + kEps);
        const double xh = (xp[i] - static_cast<double>(rmp[c])) * rs, g = gp[i];
        my.check_rel(i, yp[i], xh * wp[c] + bp[c], NormTol<T>::y);
        mdx.check_rel(i, dxp[i], wp[c] * rs * g, NormTol<T>::dx);
        dw[c] += g * xh;
        db[c] += g;
        adw[c] += std::abs(g * xh);
        adb[c] += std::abs(g);
      }
    my.require();
    mdx.require();
    Mismatches mw("dweight (eval)"), mb("dbias (eval)"), mr("running statistics unchanged (eval)");
    const T *dwp = wl.grad().data<T>(), *dbp = bl.grad().data<T>();
    for (std::int64_t c = 0; c < C; ++c) {
      mw.check(c, dwp[c], static_cast<double>(dw[c]), NormTol<T>::sum * static_cast<double>(adw[c]) + 1e-300);
      mb.check(c, dbp[c], static_cast<double>(db[c]), NormTol<T>::sum * static_cast<double>(adb[c]) + 1e-300);
      mr.check(c, rm.data<T>()[c], rmp[c], 0.0);
      mr.check(C + c, rv.data<T>()[c], rvp[c], 0.0);
    }
    mw.require();
    mb.require();
    mr.require();
  }
};

template <class T>
void run_all(const Shape& shape, Layout l, const Op& op, bool instance) {
  ThreadsGuard guard;
  const Problem<T> p(shape, l, 7);
  for (int nt : thread_counts()) {
    set_num_threads(nt);
    INFO(dtype_label<T>() << " " << shape_text(shape) << ", " << nt << " thread(s), " << numel_of(shape) * sizeof(T)
                          << " bytes");
    p.check_input_stats(op, instance);
    if (instance) p.check_running_stats(op);
  }
}

// LayerNorm over the last K values of (R, K).
template <class T>
void check_layer_norm(std::int64_t R, std::int64_t K) {
  const Op op = [K](const Tensor& x, const Tensor& w, const Tensor& b, Tensor&, Tensor&, bool) {
    return F::layer_norm(x, {K}, w, b, kEps);
  };
  run_all<T>({R, K}, {R, K, 1, K, 1}, op, false);
}

// GroupNorm with G groups on (N, C) or (N, C, H, W).
template <class T>
void check_group_norm(const Shape& shape, std::int64_t G) {
  const std::int64_t N = shape[0], C = shape[1];
  std::int64_t S = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) S *= shape[d];
  const Op op = [G](const Tensor& x, const Tensor& w, const Tensor& b, Tensor&, Tensor&, bool) {
    return F::group_norm(x, G, w, b, kEps);
  };
  run_all<T>(shape, {N * G, C / G * S, G, C / G, S}, op, false);
}

// InstanceNorm on (N, C, H, W): input statistics with running-statistics update, then eval.
template <class T>
void check_instance_norm(const Shape& shape) {
  const std::int64_t N = shape[0], C = shape[1], S = shape[2] * shape[3];
  const Op op = [](const Tensor& x, const Tensor& w, const Tensor& b, Tensor& rm, Tensor& rv, bool train) {
    return F::instance_norm(x, rm, rv, w, b, train, kMomentum, kEps);
  };
  run_all<T>(shape, {N * C, S, C, 1, S}, op, true);
}

}  // namespace

TEMPLATE_TEST_CASE("thresholds: LayerNorm rows kernel, thread grain, row and gradient blocks, pairing, chunks",
                   "[thresholds][layernorm]", float, double) {
  using T = TestType;
  constexpr std::int64_t K = 64;
  const std::int64_t row_bytes = K * static_cast<std::int64_t>(sizeof(T));
  SECTION("kParallelGrain: R·K just below and at the grain") {
    check_layer_norm<T>(kParallelGrain / K - 1, K);
    check_layer_norm<T>(kParallelGrain / K, K);
  }
  SECTION("row block and gradient block: exactly one and one row more") {
    check_layer_norm<T>(TH::ln_row_block(K), K);
    check_layer_norm<T>(TH::ln_row_block(K) + 1, K);
    check_layer_norm<T>(TH::kLnGradBlockRows, K);
    check_layer_norm<T>(TH::kLnGradBlockRows + 1, K);
  }
  SECTION("row block size: K where it drops below kLnMaxRowBlock rows") {
    const std::int64_t k = TH::kLnRowBlockElems / TH::kLnMaxRowBlock;  // still the full block
    REQUIRE(TH::ln_row_block(k) == TH::kLnMaxRowBlock);
    REQUIRE(TH::ln_row_block(k + 1) < TH::kLnMaxRowBlock);
    check_layer_norm<T>(3 * TH::kLnMaxRowBlock + 1, k);
    check_layer_norm<T>(3 * TH::kLnMaxRowBlock + 1, k + 1);
  }
  SECTION("paired rows: the largest paired operand and one row more") {
    const std::int64_t r = static_cast<std::int64_t>(TH::kLnPairedBytes) / row_bytes;
    REQUIRE(TH::ln_rows_paired<T>(r, K, 1));
    REQUIRE_FALSE(TH::ln_rows_paired<T>(r + 1, K, 1));
    check_layer_norm<T>(r, K);
    check_layer_norm<T>(r + 1, K);
  }
  SECTION("work chunks of the forward and of the backward: one chunk and one row more") {
    const std::int64_t fwd = TH::chunk_rows(row_bytes, 1), bwd = TH::chunk_rows(2 * row_bytes, TH::kLnGradBlockRows);
    check_layer_norm<T>(fwd, K);
    check_layer_norm<T>(fwd + 1, K);
    check_layer_norm<T>(bwd, K);
    check_layer_norm<T>(bwd + 1, K);
  }
}

TEMPLATE_TEST_CASE("thresholds: LayerNorm, streaming stores of dx", "[thresholds][layernorm]", float, double) {
  using T = TestType;
  constexpr std::int64_t K = 64;  // whole vectors: the row kernel streams only then
  STATIC_REQUIRE(K % static_cast<std::int64_t>(64 / sizeof(T)) == 0);  // whole 64-byte vectors: every ISA variant
  const std::int64_t r = rows_reaching(TH::kStreamBytes, K * static_cast<std::int64_t>(sizeof(T)));
  check_layer_norm<T>(r - 1, K);
  check_layer_norm<T>(r, K);
}

TEMPLATE_TEST_CASE("thresholds: GroupNorm on (N, C) (rows kernel with groups) and (N, C, H, W)",
                   "[thresholds][groupnorm]", float, double) {
  using T = TestType;
  SECTION("(N, C): kParallelGrain, N·C just below and at the grain") {
    constexpr std::int64_t C = 64, G = 4;
    check_group_norm<T>({kParallelGrain / C - 1, C}, G);
    check_group_norm<T>({kParallelGrain / C, C}, G);
  }
  SECTION("(N, C, H, W): forward row grain and backward thread grain") {
    constexpr std::int64_t C = 8, G = 4, H = 8, W = 8;
    const std::int64_t K = C / G * H * W;
    const std::int64_t n = parallel_rows_grain(K) / G;  // N·G rows reach the grain
    REQUIRE(n * G == parallel_rows_grain(K));
    REQUIRE(n * G * K >= kParallelGrain);
    check_group_norm<T>({n - 1, C, H, W}, G);
    check_group_norm<T>({n, C, H, W}, G);
  }
}

TEMPLATE_TEST_CASE("thresholds: InstanceNorm2d, row grain, train and eval", "[thresholds][instancenorm]", float,
                   double) {
  using T = TestType;
  constexpr std::int64_t C = 8, H = 8, W = 8;
  const std::int64_t n = parallel_rows_grain(H * W) / C;
  REQUIRE(n * C == parallel_rows_grain(H * W));
  check_instance_norm<T>({n - 1, C, H, W});
  check_instance_norm<T>({n, C, H, W});
}
