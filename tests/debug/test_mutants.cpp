// Wrong BatchNorm backward derivations as mutants: small autograd ops whose forward is the
// real train-mode batch norm and whose backward is deliberately wrong. Each must be caught
// by gradcheck and by the chapter's checks (column sums of dX are 0; column sums of dX·x̂
// are 0), and the correct variant must agree with the fused functional::batch_norm.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/debug/bn_grad_check.h>
#include <tapegrad/layers/functional/batch_norm.h>

using namespace tapegrad;

namespace {

enum class Mutant {
  Correct,           ///< dx = rstd·(dx̂ - mean_n(dx̂) - x̂·mean_n(dx̂·x̂)), dx̂ = γ·dy
  ConstantStats,     ///< μ and σ treated as constants: dx = rstd·dx̂ (the eval-mode backward)
  WrongAxis,         ///< the two means taken over the features (dim 1) instead of the batch
  UnbiasedBackward,  ///< N-1 in the variance path: x̂·Σ_n(dx̂·x̂)/(N-1)
};

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::Correct: return "correct";
    case Mutant::ConstantStats: return "statistics held constant";
    case Mutant::WrongAxis: return "mean over the wrong axis";
    case Mutant::UnbiasedBackward: return "N-1 variance in the backward";
  }
  return "";
}

// Train-mode batch norm of x (N, C) float64 with weight, bias (C); backward per `kind`.
Tensor mutant_batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, Mutant kind, double eps = 1e-5) {
  const std::int64_t N = x.size(0), C = x.size(1);
  const auto vx = x.to_vector(), vw = w.to_vector(), vb = b.to_vector();
  std::vector<double> rstd(C), xhat(N * C), y(N * C);
  for (std::int64_t c = 0; c < C; ++c) {
    double mu = 0, var = 0;
    for (std::int64_t n = 0; n < N; ++n) mu += vx[n * C + c];
    mu /= static_cast<double>(N);
    for (std::int64_t n = 0; n < N; ++n) var += (vx[n * C + c] - mu) * (vx[n * C + c] - mu);
    rstd[c] = 1.0 / std::sqrt(var / static_cast<double>(N) + eps);
    for (std::int64_t n = 0; n < N; ++n) {
      xhat[n * C + c] = (vx[n * C + c] - mu) * rstd[c];
      y[n * C + c] = xhat[n * C + c] * vw[c] + vb[c];
    }
  }
  Tensor out = Tensor::from_vector(y, {N, C}, Dtype::Float64);
  if (autograd::needs_grad({&x, &w, &b})) {
    autograd::record("mutant_batch_norm", out, {x, w, b}, [=](const Tensor& g, GradSink& gs) {
      const auto dy = g.to_vector();
      std::vector<double> dxh(N * C), dx(N * C), dw(C, 0.0), db(C, 0.0);
      for (std::int64_t i = 0; i < N * C; ++i) dxh[i] = dy[i] * vw[i % C];
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c) {
          dw[c] += dy[n * C + c] * xhat[n * C + c];
          db[c] += dy[n * C + c];
        }
      if (kind == Mutant::WrongAxis) {
        for (std::int64_t n = 0; n < N; ++n) {  // means over c: the bug
          double m1 = 0, m2 = 0;
          for (std::int64_t c = 0; c < C; ++c) {
            m1 += dxh[n * C + c];
            m2 += dxh[n * C + c] * xhat[n * C + c];
          }
          m1 /= static_cast<double>(C);
          m2 /= static_cast<double>(C);
          for (std::int64_t c = 0; c < C; ++c)
            dx[n * C + c] = rstd[c] * (dxh[n * C + c] - m1 - xhat[n * C + c] * m2);
        }
      } else {
        for (std::int64_t c = 0; c < C; ++c) {
          double s1 = 0, s2 = 0;
          for (std::int64_t n = 0; n < N; ++n) {
            s1 += dxh[n * C + c];                     // term 2: through the mean
            s2 += dxh[n * C + c] * xhat[n * C + c];   // term 3: through the variance
          }
          const double mean_dxh = s1 / static_cast<double>(N);
          const double var_term = kind == Mutant::UnbiasedBackward ? s2 / static_cast<double>(N - 1)
                                                                   : s2 / static_cast<double>(N);
          for (std::int64_t n = 0; n < N; ++n)
            dx[n * C + c] = kind == Mutant::ConstantStats
                                ? rstd[c] * dxh[n * C + c]
                                : rstd[c] * (dxh[n * C + c] - mean_dxh - xhat[n * C + c] * var_term);
        }
      }
      if (gs.needs(0)) gs.add(0, Tensor::from_vector(dx, {N, C}, Dtype::Float64));
      if (gs.needs(1)) gs.add(1, Tensor::from_vector(dw, {C}, Dtype::Float64));
      if (gs.needs(2)) gs.add(2, Tensor::from_vector(db, {C}, Dtype::Float64));
    });
  }
  return out;
}

struct Inputs {
  Tensor x, w, b, dy;
};

Inputs make_inputs() {
  Generator g(21);
  Inputs in;
  // channels on different scales and offsets, as after a Linear layer
  auto vx = randn({8, 3}, Dtype::Float64, g).to_vector();
  for (std::size_t i = 0; i < vx.size(); ++i) vx[i] = vx[i] * (0.5 + static_cast<double>(i % 3)) + 0.3 * (i % 3);
  in.x = Tensor::from_vector(vx, {8, 3}, Dtype::Float64);
  in.w = Tensor::from_vector({1.5, -0.7, 0.9}, {3}, Dtype::Float64);
  in.b = Tensor::from_vector({0.1, 0.2, -0.3}, {3}, Dtype::Float64);
  in.dy = randn({8, 3}, Dtype::Float64, g);
  for (Tensor* t : {&in.x, &in.w, &in.b}) t->requires_grad_();
  return in;
}

// Gradients (dx, dw, db) of Σ y·dy through `f`.
std::vector<Tensor> grads(const Inputs& in, const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f) {
  for (const Tensor* t : {&in.x, &in.w, &in.b}) t->zero_grad();
  sum(mul(f(in.x, in.w, in.b), in.dy)).backward();
  return {in.x.grad().clone(), in.w.grad().clone(), in.b.grad().clone()};
}

Tensor real_bn(const Tensor& x, const Tensor& w, const Tensor& b) {
  return layers::functional::batch_norm(x, Tensor(), Tensor(), w, b, /*training=*/true, 0.1, 1e-5);
}

double max_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  const auto va = a.to_vector(), vb = b.to_vector();
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

}  // namespace

TEST_CASE("mutant harness: forward and correct backward equal the fused functional::batch_norm", "[debug]") {
  Inputs in = make_inputs();
  {
    NoGradGuard ng;
    REQUIRE(max_diff(mutant_batch_norm(in.x, in.w, in.b, Mutant::Correct), real_bn(in.x, in.w, in.b)) < 1e-12);
  }
  const auto real = grads(in, real_bn);
  const auto ok = grads(in, [](auto& x, auto& w, auto& b) { return mutant_batch_norm(x, w, b, Mutant::Correct); });
  for (int i = 0; i < 3; ++i) REQUIRE(max_diff(real[i], ok[i]) < 1e-12);
  auto gc = gradcheck([](const std::vector<Tensor>& v) { return mutant_batch_norm(v[0], v[1], v[2], Mutant::Correct); },
                      {in.x, in.w, in.b});
  INFO(gc.message);
  REQUIRE(gc.ok);
  auto inv = debug::bn_backward_invariants(in.x, ok[0]);
  INFO(inv.to_string());
  REQUIRE(inv.ok());
}

TEST_CASE("each wrong BatchNorm backward is caught by gradcheck and by the chapter's checks", "[debug]") {
  Inputs in = make_inputs();
  const auto real = grads(in, real_bn);
  for (Mutant m : {Mutant::ConstantStats, Mutant::WrongAxis, Mutant::UnbiasedBackward}) {
    INFO(mutant_name(m));
    auto fn = [m](const std::vector<Tensor>& v) { return mutant_batch_norm(v[0], v[1], v[2], m); };
    const auto got = grads(in, [m](auto& x, auto& w, auto& b) { return mutant_batch_norm(x, w, b, m); });
    // dγ and dβ are right in every mutant; only dX is wrong
    REQUIRE(max_diff(got[1], real[1]) < 1e-12);
    REQUIRE(max_diff(got[2], real[2]) < 1e-12);
    const double dx_error = max_diff(got[0], real[0]);
    CAPTURE(dx_error);
    REQUIRE(dx_error > 1e-2);

    auto gc = gradcheck(fn, {in.x, in.w, in.b});
    CAPTURE(gc.max_abs_error, gc.message);
    REQUIRE(!gc.ok);
    REQUIRE(gc.max_abs_error > 1e-3);
    REQUIRE_THAT(gc.message, Catch::Contains("input 0"));

    const auto inv = debug::bn_backward_invariants(in.x, got[0]);
    CAPTURE(inv.col_sum, inv.col_dot_xhat);
    REQUIRE(!inv.ok());
    switch (m) {
      case Mutant::ConstantStats:  // both identities broken
        REQUIRE(inv.col_sum > 1e-2);
        REQUIRE(inv.col_dot_xhat > 1e-2);
        break;
      case Mutant::WrongAxis:
        REQUIRE(inv.col_sum > 1e-2);
        break;
      case Mutant::UnbiasedBackward:  // column sums still vanish (Σ x̂ = 0): only dX·x̂ catches it
        REQUIRE(inv.col_sum < 1e-12);
        REQUIRE(inv.col_dot_xhat > 1e-2);
        break;
      default:
        break;
    }
  }
}
