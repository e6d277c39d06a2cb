// The fused (N, C) batch-norm kernels and the per-row LayerNorm kernel in each of their
// layouts: whole vectors and leftover channels, cache-resident sizes (a chunk of channels
// in registers) and streamed sizes (row by row, streaming stores), one and two threads.
// References are plain float64 two-pass loops written here; float32 results must agree to
// the rounding of float32 sums, float64 ones to 1e-12; constant channels and rows stay exact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/group_norm.h>
#include <tapegrad/layers/functional/layer_norm.h>

using namespace tapegrad;
namespace F = tapegrad::layers::functional;

namespace {

struct ThreadsGuard {
  int prev = get_num_threads();
  ~ThreadsGuard() { set_num_threads(prev); }
};

// Values of a (rows, cols) problem and its reference results, all in double.
struct Ref {
  std::vector<double> y, dx, dw, db;
  std::vector<double> dw_abs, db_abs;  // Σ|terms| of each channel sum: the scale of its rounding
};

// Batch norm in train mode, per channel c over the N rows: two passes in long double.
Ref bn_reference(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& w,
                 const std::vector<double>& b, std::int64_t N, std::int64_t C, double eps) {
  Ref r{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(C),
        std::vector<double>(C), std::vector<double>(C), std::vector<double>(C)};
  for (std::int64_t c = 0; c < C; ++c) {
    long double s = 0, q = 0, sg = 0, sgx = 0;
    for (std::int64_t n = 0; n < N; ++n) s += x[n * C + c];
    const long double mu = s / N;
    for (std::int64_t n = 0; n < N; ++n) q += (x[n * C + c] - mu) * (x[n * C + c] - mu);
    const long double rstd = 1.0L / std::sqrt(q / N + eps);
    for (std::int64_t n = 0; n < N; ++n) {
      const long double xh = (x[n * C + c] - mu) * rstd;
      sg += g[n * C + c];
      sgx += g[n * C + c] * xh;
      r.dw_abs[c] += std::abs(static_cast<double>(g[n * C + c] * xh));
      r.db_abs[c] += std::abs(g[n * C + c]);
    }
    r.dw[c] = static_cast<double>(sgx);
    r.db[c] = static_cast<double>(sg);
    for (std::int64_t n = 0; n < N; ++n) {
      const long double xh = (x[n * C + c] - mu) * rstd;
      r.y[n * C + c] = static_cast<double>(xh * w[c] + b[c]);
      // dx = γ·rstd/N·(N·dy - Σdy - x̂·Σ(dy·x̂))
      r.dx[n * C + c] = static_cast<double>(w[c] * rstd / N * (N * g[n * C + c] - sg - xh * sgx));
    }
  }
  return r;
}

// Layer norm over each row of K values, per-element affine.
Ref ln_reference(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& w,
                 const std::vector<double>& b, std::int64_t R, std::int64_t K, double eps) {
  Ref r{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(K),
        std::vector<double>(K), std::vector<double>(K), std::vector<double>(K)};
  for (std::int64_t i = 0; i < R; ++i) {
    const double* xr = x.data() + i * K;
    const double* gr = g.data() + i * K;
    long double s = 0, q = 0, a = 0, bx = 0;
    for (std::int64_t j = 0; j < K; ++j) s += xr[j];
    const long double mu = s / K;
    for (std::int64_t j = 0; j < K; ++j) q += (xr[j] - mu) * (xr[j] - mu);
    const long double rstd = 1.0L / std::sqrt(q / K + eps);
    for (std::int64_t j = 0; j < K; ++j) {
      const long double xh = (xr[j] - mu) * rstd;
      a += w[j] * gr[j];
      bx += w[j] * gr[j] * xh;
      r.dw[j] += static_cast<double>(gr[j] * xh);
      r.db[j] += gr[j];
      r.dw_abs[j] += std::abs(static_cast<double>(gr[j] * xh));
      r.db_abs[j] += std::abs(gr[j]);
    }
    for (std::int64_t j = 0; j < K; ++j) {
      const long double xh = (xr[j] - mu) * rstd;
      r.y[i * K + j] = static_cast<double>(xh * w[j] + b[j]);
      // dx = rstd·(dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)), dx̂ = γ·dy
      r.dx[i * K + j] = static_cast<double>(rstd * (w[j] * gr[j] - a / K - xh * bx / K));
    }
  }
  return r;
}

// Every element within tol·max(1, |want|); reports the first that is not.
void check_close(const char* what, const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = got.size();
  for (std::size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])))) bad = i;
  INFO(what << ": element " << bad << " of " << got.size() << ": got " << (bad < got.size() ? got[bad] : 0)
            << ", want " << (bad < got.size() ? want[bad] : 0));
  CHECK(bad == got.size());
}
// Channel sums: within tol·Σ|terms| (+ tol), the bound of a sum's rounding.
void check_sums(const char* what, const std::vector<double>& got, const std::vector<double>& want,
                const std::vector<double>& scale, double tol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = got.size();
  for (std::size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (scale[i] + 1.0))) bad = i;
  INFO(what << ": channel " << bad << ": got " << (bad < got.size() ? got[bad] : 0) << ", want "
            << (bad < got.size() ? want[bad] : 0));
  CHECK(bad == got.size());
}

struct Problem {
  Tensor x, g, w, b;
};
Problem make_problem(std::int64_t rows, std::int64_t cols, std::int64_t channels, Dtype dt, std::uint64_t seed) {
  Generator gen(seed);
  // an offset mean and a spread that is not 1, so centring and scaling both matter
  Tensor x = uniform({rows, cols}, 2.0, 5.0, dt, gen);
  Tensor g = randn({rows, cols}, dt, gen);
  Tensor w = uniform({channels}, 0.5, 1.5, dt, gen);
  Tensor b = uniform({channels}, -1.0, 1.0, dt, gen);
  return {x, g, w, b};
}

// Runs f(x, w, b) forward and backward with dy = g; returns y, dx, dw, db as doubles.
template <class Fn>
std::vector<std::vector<double>> run(const Problem& p, Fn f) {
  Tensor x = p.x.clone().requires_grad_(), w = p.w.clone().requires_grad_(), b = p.b.clone().requires_grad_();
  Tensor y = f(x, w, b);
  y.backward(p.g);
  return {y.to_vector(), x.grad().to_vector(), w.grad().to_vector(), b.grad().to_vector()};
}

}  // namespace

TEST_CASE("BatchNorm (N, C) kernels match a float64 reference in every layout, 1 and 2 threads", "[norm-kernels]") {
  ThreadsGuard guard;
  struct Case {
    std::int64_t N, C;
    Dtype dt;
    const char* layout;
  };
  const Case cases[] = {
      {3, 37, Dtype::Float64, "cached: 4 vectors + 5 single channels"},
      {33, 50, Dtype::Float32, "cached: 3 vectors + 2 single channels"},
      {32, 128, Dtype::Float32, "cached: the chapter's layer"},
      {8192, 40, Dtype::Float32, "row by row, no streaming (rows not whole vectors)"},
      {6000, 24, Dtype::Float64, "row by row, double"},
      {24576, 256, Dtype::Float32, "row by row with streaming stores (24 MiB)"},
  };
  for (const Case& k : cases) {
    INFO(k.N << "x" << k.C << " " << dtype_name(k.dt) << ": " << k.layout);
    const Problem p = make_problem(k.N, k.C, k.C, k.dt, 40 + static_cast<std::uint64_t>(k.C));
    const Ref ref = bn_reference(p.x.to_vector(), p.g.to_vector(), p.w.to_vector(), p.b.to_vector(), k.N, k.C, 1e-5);
    const bool f32 = k.dt == Dtype::Float32;
    for (int threads : {1, 2}) {
      INFO(threads << " threads");
      set_num_threads(threads);
      auto got = run(p, [](const Tensor& x, const Tensor& w, const Tensor& b) {
        return F::batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
      });
      check_close("y", got[0], ref.y, f32 ? 4e-6 : 1e-12);
      check_close("dx", got[1], ref.dx, f32 ? 2e-5 : 1e-11);
      check_sums("dgamma", got[2], ref.dw, ref.dw_abs, f32 ? 4e-6 : 1e-13);
      check_sums("dbeta", got[3], ref.db, ref.db_abs, f32 ? 4e-6 : 1e-13);
    }
  }
}

TEST_CASE("BatchNorm float32: a constant channel stays exact in the cached and streamed (N, C) paths",
          "[norm-kernels]") {
  ThreadsGuard guard;
  for (std::int64_t N : {48, 24576}) {
    const std::int64_t C = 256;
    Problem p = make_problem(N, C, C, Dtype::Float32, 7);
    float* xp = p.x.data<float>();
    for (std::int64_t n = 0; n < N; ++n) xp[n * C + 5] = 0.1f;
    for (int threads : {1, 2}) {
      INFO(N << " rows, " << threads << " threads");
      set_num_threads(threads);
      Tensor m, v;
      F::batch_moments(p.x, m, v);
      CHECK(v.at(5) == 0.0);
      CHECK(m.at(5) == static_cast<double>(0.1f));
      // eps = 0: rstd = 0 for the constant channel, so y = β and dx = 0 exactly (PyTorch's rule)
      auto got = run(p, [](const Tensor& x, const Tensor& w, const Tensor& b) {
        return F::batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 0.0);
      });
      const float beta = p.b.data<float>()[5];
      bool y_exact = true, dx_zero = true;
      for (std::int64_t n = 0; n < N; ++n) {
        y_exact = y_exact && got[0][n * C + 5] == static_cast<double>(beta);
        dx_zero = dx_zero && got[1][n * C + 5] == 0.0;
      }
      CHECK(y_exact);
      CHECK(dx_zero);
      CHECK(got[2][5] == 0.0);
    }
  }
}

TEST_CASE("BatchNorm (N, C) running statistics agree with the batch statistics' float64 reference",
          "[norm-kernels]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  // (4096, 48) float32 crosses into the row-by-row kernels; momentum 1 copies the batch's
  // mean and unbiased variance into the buffers.
  const std::int64_t N = 4096, C = 48;
  const Problem p = make_problem(N, C, C, Dtype::Float32, 3);
  Tensor rm = Tensor::zeros({C}), rv = Tensor::ones({C});
  NoGradGuard ng;
  F::batch_norm(p.x, rm, rv, p.w, p.b, true, 1.0, 1e-5);
  const auto x = p.x.to_vector();
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0, q = 0;
    for (std::int64_t n = 0; n < N; ++n) s += x[n * C + c];
    const double mu = s / N;
    for (std::int64_t n = 0; n < N; ++n) q += (x[n * C + c] - mu) * (x[n * C + c] - mu);
    CHECK(rm.at(c) == Approx(mu).epsilon(1e-6));
    CHECK(rv.at(c) == Approx(q / (N - 1)).epsilon(1e-5));
  }
}

TEST_CASE("LayerNorm per-row kernel matches a float64 reference in every layout, 1 and 2 threads",
          "[norm-kernels]") {
  ThreadsGuard guard;
  struct Case {
    std::int64_t R, K;
    Dtype dt;
    bool affine;
    const char* layout;
  };
  const Case cases[] = {
      {5, 7, Dtype::Float64, true, "single values only"},
      {9, 37, Dtype::Float32, true, "2 vectors + 5 single values"},
      {33, 50, Dtype::Float32, false, "no affine, 3 vectors + 2 single values"},
      {32, 128, Dtype::Float32, true, "the chapter's size"},
      {40, 1000, Dtype::Float64, true, "double, long rows"},
      {24576, 256, Dtype::Float32, true, "streaming stores (24 MiB), dgamma in blocks of 64 rows"},
  };
  for (const Case& k : cases) {
    INFO(k.R << "x" << k.K << " " << dtype_name(k.dt) << ": " << k.layout);
    Problem p = make_problem(k.R, k.K, k.K, k.dt, 90 + static_cast<std::uint64_t>(k.K));
    if (!k.affine) {
      p.w = Tensor::ones({k.K}, k.dt);
      p.b = Tensor::zeros({k.K}, k.dt);
    }
    const Ref ref = ln_reference(p.x.to_vector(), p.g.to_vector(), p.w.to_vector(), p.b.to_vector(), k.R, k.K, 1e-5);
    const bool f32 = k.dt == Dtype::Float32;
    for (int threads : {1, 2}) {
      INFO(threads << " threads");
      set_num_threads(threads);
      if (k.affine) {
        auto got = run(p, [&](const Tensor& x, const Tensor& w, const Tensor& b) {
          return F::layer_norm(x, {k.K}, w, b, 1e-5);
        });
        check_close("y", got[0], ref.y, f32 ? 4e-6 : 1e-12);
        check_close("dx", got[1], ref.dx, f32 ? 2e-5 : 1e-11);
        check_sums("dgamma", got[2], ref.dw, ref.dw_abs, f32 ? 4e-6 : 1e-13);
        check_sums("dbeta", got[3], ref.db, ref.db_abs, f32 ? 4e-6 : 1e-13);
      } else {
        Tensor x = p.x.clone().requires_grad_();
        Tensor y = F::layer_norm(x, {k.K}, Tensor(), Tensor(), 1e-5);
        y.backward(p.g);
        check_close("y", y.to_vector(), ref.y, f32 ? 4e-6 : 1e-12);
        check_close("dx", x.grad().to_vector(), ref.dx, f32 ? 2e-5 : 1e-11);
      }
    }
  }
}

TEST_CASE("LayerNorm float32: a constant row normalises to exactly beta, cached and streamed", "[norm-kernels]") {
  ThreadsGuard guard;
  for (std::int64_t R : {16, 24576}) {
    const std::int64_t K = 256;
    Problem p = make_problem(R, K, K, Dtype::Float32, 11);
    float* xp = p.x.data<float>();
    for (std::int64_t j = 0; j < K; ++j) xp[3 * K + j] = -7.3f;
    for (int threads : {1, 2}) {
      INFO(R << " rows, " << threads << " threads");
      set_num_threads(threads);
      NoGradGuard ng;
      const auto y = F::layer_norm(p.x, {K}, p.w, p.b, 1e-5).to_vector();
      const auto b = p.b.to_vector();
      bool exact = true;
      for (std::int64_t j = 0; j < K; ++j) exact = exact && y[3 * K + j] == b[j];
      CHECK(exact);
    }
  }
}

TEST_CASE("GroupNorm on (N, C) runs the per-row kernel with each group's slice of gamma", "[norm-kernels]") {
  // (6, 64) in 4 groups: rows of 16 values, γ/β offset by 16 per group; reference = LayerNorm
  // of the (6·4, 16) view with that group's γ/β.
  const std::int64_t N = 6, C = 64, G = 4, K = C / G;
  const Problem p = make_problem(N, C, C, Dtype::Float64, 5);
  auto got = run(p, [](const Tensor& x, const Tensor& w, const Tensor& b) { return F::group_norm(x, G, w, b, 1e-5); });
  const auto x = p.x.to_vector(), g = p.g.to_vector(), w = p.w.to_vector(), b = p.b.to_vector();
  std::vector<double> dw(C, 0.0), db(C, 0.0);
  for (std::int64_t grp = 0; grp < G; ++grp) {
    std::vector<double> xs, gs;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = 0; j < K; ++j) {
        xs.push_back(x[n * C + grp * K + j]);
        gs.push_back(g[n * C + grp * K + j]);
      }
    const std::vector<double> ws(w.begin() + grp * K, w.begin() + (grp + 1) * K);
    const std::vector<double> bs(b.begin() + grp * K, b.begin() + (grp + 1) * K);
    const Ref ref = ln_reference(xs, gs, ws, bs, N, K, 1e-5);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = 0; j < K; ++j) {
        CHECK(got[0][n * C + grp * K + j] == Approx(ref.y[n * K + j]).epsilon(1e-12).margin(1e-12));
        CHECK(got[1][n * C + grp * K + j] == Approx(ref.dx[n * K + j]).epsilon(1e-10).margin(1e-12));
      }
    for (std::int64_t j = 0; j < K; ++j) {
      CHECK(got[2][grp * K + j] == Approx(ref.dw[j]).epsilon(1e-12).margin(1e-12));
      CHECK(got[3][grp * K + j] == Approx(ref.db[j]).epsilon(1e-12).margin(1e-12));
    }
  }
}

TEST_CASE("gradcheck: (N, C) batch norm and per-row layer norm with vector chunks and leftover channels",
          "[norm-kernels][gradcheck]") {
  // 37 float64 channels: four 8-wide vectors and five single channels in each kernel.
  Generator gen(21);
  Tensor x = uniform({6, 37}, -2.0, 2.0, Dtype::Float64, gen).requires_grad_();
  Tensor w = uniform({37}, 0.5, 1.5, Dtype::Float64, gen).requires_grad_();
  Tensor b = uniform({37}, -1.0, 1.0, Dtype::Float64, gen).requires_grad_();
  auto bn = gradcheck(
      [](const std::vector<Tensor>& v) { return F::batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true); },
      {x, w, b});
  INFO(bn.message);
  CHECK(bn.ok);
  auto ln = gradcheck([](const std::vector<Tensor>& v) { return F::layer_norm(v[0], {37}, v[1], v[2]); }, {x, w, b});
  INFO(ln.message);
  CHECK(ln.ok);
  auto ln_plain = gradcheck([](const std::vector<Tensor>& v) { return F::layer_norm(v[0], {37}); }, {x});
  INFO(ln_plain.message);
  CHECK(ln_plain.ok);
}

TEST_CASE("BatchNorm and LayerNorm (N, C) results are the same bits on 1 and 2 threads", "[norm-kernels]") {
  // (24576, 256) float32: 24 chunks of work taken by whichever thread is free; the sums keep
  // one partial per chunk and merge them in chunk order, so the split cannot change a bit.
  ThreadsGuard guard;
  const Problem p = make_problem(24576, 256, 256, Dtype::Float32, 13);
  std::vector<std::vector<double>> bn[2], ln[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor m, v;
    F::batch_moments(p.x, m, v);
    bn[threads - 1] = run(p, [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return F::batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
    });
    bn[threads - 1].push_back(m.to_vector());
    bn[threads - 1].push_back(v.to_vector());
    ln[threads - 1] = run(p, [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return F::layer_norm(x, {256}, w, b, 1e-5);
    });
  }
  const char* bn_names[] = {"y", "dx", "dgamma", "dbeta", "mean", "var"};
  for (std::size_t i = 0; i < bn[0].size(); ++i) {
    INFO("BatchNorm " << bn_names[i]);
    CHECK(bn[0][i] == bn[1][i]);
  }
  for (std::size_t i = 0; i < ln[0].size(); ++i) {
    INFO("LayerNorm " << bn_names[i]);
    CHECK(ln[0][i] == ln[1][i]);
  }
}
