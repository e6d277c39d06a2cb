// BatchNorm1d/2d and BatchRenorm1d/2d: the chapter's worked examples, the backward guide's
// practice answers, gradcheck in train and eval mode, the one-value-per-channel rule, bad
// shapes, dtypes and options refused naming expected and actual (docs/errors.md), the
// properties (shift/scale invariance, batch dependence by mode), and BatchRenorm (equals BN
// at rmax = 1, dmax = 0; hand-computed values; gradcheck).
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include "test_errors_support.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using namespace tapegrad::test;
using Catch::Matchers::Contains;

namespace {
Tensor t64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s, Dtype::Float64); }
void set(Tensor t, const std::vector<double>& v) {
  NoGradGuard ng;
  t.copy_(t64(v, t.shape()));
}
// |got - want| <= atol at every element (absolute, unlike test::require_close).
void require_abs_close(const Tensor& got, const std::vector<double>& want, double atol) {
  auto g = got.to_vector();
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    REQUIRE(g[i] == Approx(want[i]).margin(atol).epsilon(0));
  }
}
BatchNormOptions f64(double eps = 1e-5, bool affine = true) {
  BatchNormOptions o;
  o.eps = eps;
  o.affine = affine;
  o.dtype = Dtype::Float64;
  return o;
}
// gradcheck in train and eval mode with the running statistics restored before every
// forward (BatchRenorm's train output depends on them). The running statistics are far
// from the batch's (mean `far_mean`, std 20), so r and d sit on their clipping bounds:
// there the forward's true derivative is the stop-gradient backward of the paper. (Inside
// the bounds r and d move with the batch and the paper's backward deliberately ignores
// that; the hand-computed test checks that backward.)
void gradcheck_renorm(BatchNormBase& m, Tensor x, double far_mean) {
  m.running_mean.fill_(far_mean);
  m.running_var.fill_(400.0);
  gradcheck_module(m, x, 5, keep_running_stats(m));
}
}  // namespace

TEST_CASE("chapter worked example: 4x2 batch, eps = 0, forward and backward", "[batchnorm][textbook]") {
  BatchNorm1d bn(2, f64(0.0));
  set(bn.weight, {2, 0.5});
  set(bn.bias, {1, 0});
  Tensor x = t64({0, 1, 6, 5, 6, 1, 8, 5}, {4, 2}).requires_grad_();
  Tensor y = bn(x);
  // μ = (5, 3), σ² = (9, 4): x̂ col 0 = (-5, 1, 1, 3)/3, col 1 = (-1, 1, -1, 1)
  require_abs_close(y, {2 * -5.0 / 3 + 1, -0.5, 2 * 1.0 / 3 + 1, 0.5, 2 * 1.0 / 3 + 1, -0.5, 2 * 3.0 / 3 + 1, 0.5}, 1e-12);
  y.backward(t64({1, 1, 0, 2, 2, 0, -1, 1}, {4, 2}));
  require_abs_close(bn.weight.grad(), {-2, 2}, 1e-12);
  require_abs_close(bn.bias.grad(), {2, 4}, 1e-12);
  require_abs_close(x.grad(), {-2.0 / 9, 1.0 / 8, -2.0 / 9, 1.0 / 8, 10.0 / 9, -1.0 / 8, -6.0 / 9, -1.0 / 8}, 1e-12);
  // running stats after this batch (momentum 0.1, unbiased variance 12 and 16/3)
  require_abs_close(bn.running_mean, {0.5, 0.3}, 1e-12);
  require_abs_close(bn.running_var, {0.9 + 0.1 * 12, 0.9 + 0.1 * 16.0 / 3}, 1e-12);
}

TEST_CASE("chapter worked example: eval-mode gradient is gamma/sqrt(running_var) * dy", "[batchnorm][textbook]") {
  BatchNorm1d bn(2, f64(0.0));
  set(bn.weight, {2, 0.5});
  set(bn.running_mean, {5, 3});
  set(bn.running_var, {9, 4});
  bn.eval();
  Tensor x = t64({0, 1, 6, 5, 6, 1, 8, 5}, {4, 2}).requires_grad_();
  bn(x).backward(t64({1, 1, 0, 2, 2, 0, -1, 1}, {4, 2}));
  auto g = x.grad().to_vector();
  // column 2: 0.5 / sqrt(4) · (1, 2, 0, 1) = (0.25, 0.5, 0, 0.25)
  REQUIRE(g[1] == Approx(0.25));
  REQUIRE(g[3] == Approx(0.5));
  REQUIRE(g[5] == Approx(0.0).margin(1e-15));
  REQUIRE(g[7] == Approx(0.25));
  REQUIRE(g[0] == Approx(2.0 / 3));  // column 1: 2/3 · dy
}

TEST_CASE("chapter worked example: [1, 2, 3] normalises to -1.2247, 0, 1.2247", "[batchnorm][textbook]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  BatchNorm1d bn(1, f64());
  Tensor y = bn(t64({1, 2, 3}, {3, 1}));
  require_abs_close(y, {-1.2247448713915890 * std::sqrt(2.0 / 3 / (2.0 / 3 + 1e-5)), 0.0,
                    1.2247448713915890 * std::sqrt(2.0 / 3 / (2.0 / 3 + 1e-5))}, 1e-12);
  REQUIRE(y.at(0) == Approx(-1.2247).margin(5e-5));
}

TEST_CASE("backward guide practice: (2,2,6,6), constant upstream, inference pass-through", "[batchnorm][textbook]") {
  BatchNorm1d bn(1, f64(0.0));
  Tensor x = t64({2, 2, 6, 6}, {4, 1}).requires_grad_();
  Tensor y = bn(x);
  require_abs_close(y, {-1, -1, 1, 1}, 1e-12);  // μ = 4, σ² = 4
  y.backward(t64({3, 3, 3, 3}, {4, 1}));
  require_abs_close(x.grad(), {0, 0, 0, 0}, 1e-12);  // a constant upstream gradient is absorbed by the mean
  Tensor m, v;
  functional::batch_moments(x.detach(), m, v);
  REQUIRE(m.item() == 4.0);
  REQUIRE(v.item() == 4.0);

  BatchNorm1d inf(1, f64(0.0));
  set(inf.weight, {3});
  set(inf.running_var, {9});
  inf.eval();
  Tensor xi = t64({5, -1, 0, 7}, {4, 1}).requires_grad_();
  inf(xi).backward(t64({1, -2, 0, 4}, {4, 1}));
  require_abs_close(xi.grad(), {1, -2, 0, 4}, 1e-12);  // γ/sqrt(var) = 3/3 = 1
}

TEST_CASE("batch of one in train mode throws and changes nothing; eval mode works", "[batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  for (auto momentum : {std::optional<double>(0.1), std::optional<double>()}) {
    BatchNormOptions o = f64();
    o.momentum = momentum;
    BatchNorm1d bn(3, o);
    Tensor x = t64({0.5, -1, 2}, {1, 3});
    REQUIRE_THROWS_WITH(bn(x), Catch::Contains("more than 1 value per channel") && Catch::Contains("[1, 3]"));
    REQUIRE(bn.batches_tracked() == 0);
    require_abs_close(bn.running_mean, {0, 0, 0}, 0);
    require_abs_close(bn.running_var, {1, 1, 1}, 0);
    bn.eval();
    require_abs_close(bn(x), {0.5 / std::sqrt(1 + 1e-5), -1 / std::sqrt(1 + 1e-5), 2 / std::sqrt(1 + 1e-5)}, 1e-12);
    bn.train();
    bn(t64({0, 0, 0, 2, 0, 4}, {2, 3}));
    REQUIRE(bn.batches_tracked() == 1);
  }
  // (N, C, L) with N = 1 but L > 1 has more than one value per channel: allowed
  BatchNorm1d bn(2, f64());
  REQUIRE_NOTHROW(bn(t64({1, 2, 3, 4}, {1, 2, 2})));
}

TEST_CASE("momentum unset is a cumulative average; Keras decay converts explicitly", "[batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  BatchNormOptions o = f64();
  o.momentum = std::nullopt;
  BatchNorm1d bn(1, o);
  bn(t64({0, 2}, {2, 1}));   // mean 1, unbiased var 2
  bn(t64({4, 6}, {2, 1}));   // mean 5, var 2
  bn(t64({1, 1, 4}, {3, 1}));  // mean 2, var 3
  require_abs_close(bn.running_mean, {(1 + 5 + 2) / 3.0}, 1e-12);
  require_abs_close(bn.running_var, {(2 + 2 + 3) / 3.0}, 1e-12);
  REQUIRE(momentum_from_decay(0.99) == Approx(0.01));
  REQUIRE(decay_from_momentum(0.1) == Approx(0.9));
  REQUIRE_THROWS_WITH(momentum_from_decay(1.5), Catch::Contains("1.5"));
  BatchNormOptions bad;
  bad.momentum = 0.99 + 0.02;
  REQUIRE_THROWS_WITH(BatchNorm1d(2, bad), Catch::Contains("momentum"));
}

TEST_CASE("gradcheck: BatchNorm1d/2d train and eval, with a constant feature and a batch of two", "[batchnorm][gradcheck]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  Generator g(3);
  for (bool train : {true, false}) {
    for (const Shape& s : {Shape{5, 3}, Shape{2, 3}, Shape{4, 3, 2}, Shape{2, 3, 2, 2}}) {
      Tensor x = uniform(s, -2, 2, Dtype::Float64, g);
      if (s[0] == 5) {  // feature 1 constant over the batch: zero variance
        NoGradGuard ng;
        for (int n = 0; n < 5; ++n) x.data<double>()[n * 3 + 1] = 0.7;
      }
      x.requires_grad_();
      Tensor w = uniform({3}, 0.5, 1.5, Dtype::Float64, g).requires_grad_();
      Tensor b = uniform({3}, -1, 1, Dtype::Float64, g).requires_grad_();
      Tensor rm = uniform({3}, -1, 1, Dtype::Float64, g), rv = uniform({3}, 0.5, 2, Dtype::Float64, g);
      auto fn = [&](const std::vector<Tensor>& v) {
        // a fresh copy of the running stats so the finite differences see the same state
        return functional::batch_norm(v[0], rm.clone(), rv.clone(), v[1], v[2], train, 0.1, 1e-3);
      };
      auto r = gradcheck(fn, {x, w, b});
      INFO("shape " << shape_str(s) << " train " << train << ": " << r.message);
      REQUIRE(r.ok);
    }
  }
}

TEST_CASE("gradcheck: Linear module and mse_loss (input and target)", "[batchnorm][gradcheck]") {
  Generator g(4);
  Linear lin(4, 3, true, Dtype::Float64, g);
  Tensor x = uniform({5, 4}, -1, 1, Dtype::Float64, g).requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, lin.weight, lin.bias});
  INFO(r.message);
  REQUIRE(r.ok);
  Tensor a = uniform({3, 2}, -1, 1, Dtype::Float64, g).requires_grad_();
  Tensor t = uniform({3, 2}, -1, 1, Dtype::Float64, g).requires_grad_();
  for (auto red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto r2 = gradcheck([&](const std::vector<Tensor>& v) { return mse_loss(v[0], v[1], red); }, {a, t});
    INFO(r2.message);
    REQUIRE(r2.ok);
  }
  REQUIRE_THROWS_WITH(mse_loss(a, reshape(t, {6})), Catch::Contains("[3, 2]") && Catch::Contains("[6]"));
}

TEST_CASE("eval mode: a sample's output does not depend on its batch companions", "[batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  Generator g(5);
  BatchNorm1d bn(4, f64());
  for (int i = 0; i < 5; ++i) bn(randn({8, 4}, Dtype::Float64, g));
  bn.eval();
  Tensor a = randn({6, 4}, Dtype::Float64, g);
  Tensor b = randn({6, 4}, Dtype::Float64, g);
  {
    NoGradGuard ng;
    Tensor ya = bn(a), yb = bn(b);
    // replace rows 1..5 of b with a's row 0 companions: row 0 output must be unchanged
    Tensor mixed = a.clone();
    for (int c = 0; c < 4; ++c) mixed.data<double>()[4 + c] = b.data<double>()[4 + c];
    Tensor ym = bn(mixed);
    for (int c = 0; c < 4; ++c) REQUIRE(ym.at(c) == ya.at(c));
    bn.train();
    Tensor yt = bn(mixed), yt0 = bn(a);
    bool differs = false;
    for (int c = 0; c < 4; ++c) differs |= yt.at(c) != yt0.at(c);
    REQUIRE(differs);
  }
}

TEST_CASE("BatchNorm input errors name expected and actual shapes", "[batchnorm]") {
  BatchNorm1d bn(3);
  REQUIRE_THROWS_WITH(bn(Tensor::zeros({4, 5})), Catch::Contains("expected 3") && Catch::Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(bn(Tensor::zeros({4, 3, 2, 2})), Catch::Contains("2D") && Catch::Contains("[4, 3, 2, 2]"));
  BatchNorm2d bn2(3);
  REQUIRE_THROWS_WITH(bn2(Tensor::zeros({4, 3})), Catch::Contains("4D") && Catch::Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(bn(Tensor::zeros({4, 3}, Dtype::Float64)), Catch::Contains("float64") && Catch::Contains("float32"));
}

TEST_CASE("eps = 0 and a constant channel: output beta and zero gradients, as PyTorch", "[batchnorm]") {
  BatchNorm1d bn(2, f64(0.0));
  set(bn.weight, {2, 0.5});
  set(bn.bias, {0.3, -0.1});
  Tensor x = t64({1, 2, 1, 4, 1, 7}, {3, 2}).requires_grad_();
  Tensor y = bn(x);
  y.backward(t64({1, 2, 3, -1, 0.5, 0.25}, {3, 2}));
  // torch.nn.BatchNorm1d(2, eps=0.0) in float64 with the same weight, bias, input and grad_output
  require_abs_close(y, {0.3, -0.6677749739576688, 0.3, -0.1811107105653812, 0.3, 0.5488856845230502}, 1e-12);
  require_abs_close(x.grad(), {0, 0.22091996167149902, 0, -0.3681999361191649, 0, 0.14727997444766594}, 1e-12);
  require_abs_close(bn.weight.grad(), {0, -1.7844356324383874}, 1e-12);
  require_abs_close(bn.bias.grad(), {4.5, 1.25}, 1e-12);
  require_abs_close(bn.running_var, {0.9, 1.5333333333333332}, 1e-12);
}

TEST_CASE("BN train mode: dX sums to zero per channel and is orthogonal to x-hat", "[norms]") {
  // y is invariant to adding a constant to a channel, so Σ_n dX[n, c] = 0 for any dY.
  BatchNorm1d bn(3, f64());
  {
    NoGradGuard ng;
    bn.weight.copy_(Tensor::from_vector({2.0, -0.5, 1.5}, {3}, Dtype::Float64));
  }
  Tensor x = rand64({6, 3}, 60, -2, 2);
  x.requires_grad_();
  Tensor y = bn.forward(x);
  y.backward(rand64({6, 3}, 61));
  Tensor colsum = sum(x.grad(), {0});
  for (double v : colsum.to_vector()) REQUIRE(std::abs(v) < 1e-13);
  // and to scaling a channel: Σ_n dX[n, c]·x[n, c] = 0 at eps = 0
  BatchNorm1d bn0(3, f64(0.0));
  Tensor x2 = rand64({6, 3}, 62, -2, 2);
  x2.requires_grad_();
  bn0.forward(x2).backward(rand64({6, 3}, 63));
  for (double v : sum(mul(x2.grad(), x2.detach()), {0}).to_vector()) REQUIRE(std::abs(v) < 1e-12);
}

TEST_CASE("BN train mode is invariant to per-channel shift and scale at eps = 0", "[norms]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  BatchNorm2d bn(2, f64(0.0));
  Tensor x = rand64({3, 2, 2, 2}, 64);
  Tensor y = bn.forward(x);
  require_close(bn.forward(x * 4.0 - 7.0), y, 1e-12);
}

TEST_CASE("BN eval: a sample's output ignores its batch; train: it does not", "[norms]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  BatchNorm1d bn(2, f64());
  bn.running_mean.copy_(Tensor::from_vector({0.5, -1}, {2}, Dtype::Float64));
  bn.running_var.copy_(Tensor::from_vector({2, 0.5}, {2}, Dtype::Float64));
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, Dtype::Float64);
  Tensor b = Tensor::from_vector({1, 2, -30, 40, 0, 0}, {3, 2}, Dtype::Float64);  // same first row
  bn.eval();
  auto ea = bn.forward(a).to_vector(), eb = bn.forward(b).to_vector();
  REQUIRE(ea[0] == eb[0]);
  REQUIRE(ea[1] == eb[1]);
  bn.train();
  auto ta = bn.forward(a).to_vector(), tb = bn.forward(b).to_vector();
  REQUIRE(std::abs(ta[0] - tb[0]) > 0.1);
  REQUIRE(std::abs(ta[1] - tb[1]) > 0.1);
}

TEST_CASE("BatchRenorm with rmax = 1, dmax = 0 is BatchNorm: values, grads, buffers", "[norms]") {
  for (int rank : {2, 3, 4}) {
    INFO("rank " << rank);
    const Shape s = rank == 2 ? Shape{5, 3} : rank == 3 ? Shape{4, 3, 2} : Shape{2, 3, 2, 2};
    std::unique_ptr<BatchNormBase> bn, brn;
    if (rank == 4) {
      bn = std::make_unique<BatchNorm2d>(3, f64());
      brn = std::make_unique<BatchRenorm2d>(3, f64(), 1.0, 0.0);
    } else {
      bn = std::make_unique<BatchNorm1d>(3, f64());
      brn = std::make_unique<BatchRenorm1d>(3, f64(), 1.0, 0.0);
    }
    for (auto* m : {bn.get(), brn.get()}) {  // the same non-trivial state in both
      NoGradGuard ng;
      m->weight.copy_(Tensor::from_vector({1.5, -0.5, 2}, {3}, Dtype::Float64));
      m->bias.copy_(Tensor::from_vector({0.1, 0.2, -0.3}, {3}, Dtype::Float64));
      m->running_mean.copy_(Tensor::from_vector({3, -2, 0.5}, {3}, Dtype::Float64));
      m->running_var.copy_(Tensor::from_vector({9, 0.1, 4}, {3}, Dtype::Float64));
    }
    for (int step = 0; step < 3; ++step) {
      Tensor x = rand64(s, 70 + step, -2, 2), g = rand64(s, 80 + step);
      Tensor x1 = x.clone().requires_grad_(), x2 = x.clone().requires_grad_();
      bn->zero_grad();
      brn->zero_grad();
      Tensor y1 = bn->forward(x1), y2 = brn->forward(x2);
      require_close(y2, y1, 1e-13);
      y1.backward(g);
      y2.backward(g);
      require_close(x2.grad(), x1.grad(), 1e-12);
      require_close(brn->weight.grad(), bn->weight.grad(), 1e-12);
      require_close(brn->bias.grad(), bn->bias.grad(), 1e-12);
      require_close(brn->running_mean, bn->running_mean, 1e-14);
      require_close(brn->running_var, bn->running_var, 1e-14);
      REQUIRE(brn->batches_tracked() == step + 1);
    }
    bn->eval();
    brn->eval();
    Tensor x = rand64(s, 90);
    require_close(brn->forward(x), bn->forward(x), 1e-14);
  }
}

TEST_CASE("BatchRenorm values against a hand computation", "[norms]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  // x = [1, 2, 3, 6] (one channel): μ_B = 3, σ²_B = (4 + 1 + 0 + 9)/4 = 3.5, eps = 0.
  // running_mean 0.5, running_var 4 -> σ_run = 2.
  // r = sqrt(3.5)/2 = 0.935 (inside [1/1.5, 1.5]); d = (3 - 0.5)/2 = 1.25 -> clipped to 0.5.
  // x̂·r = (x - 3)/sqrt(3.5)·sqrt(3.5)/2 = (x - 3)/2 = [-1, -0.5, 0, 1.5]
  // y = γ·(x̂·r + d) + β with γ = 2, β = 0.5: [-0.5, 0.5, 1.5, 4.5]
  BatchRenorm1d brn(1, f64(0.0), 1.5, 0.5);
  {
    NoGradGuard ng;
    brn.weight.fill_(2.0);
    brn.bias.fill_(0.5);
  }
  brn.running_mean.fill_(0.5);
  brn.running_var.fill_(4.0);
  Tensor x = Tensor::from_vector({1, 2, 3, 6}, {4, 1}, Dtype::Float64);
  require_close(brn.forward(x), Tensor::from_vector({-0.5, 0.5, 1.5, 4.5}, {4, 1}, Dtype::Float64), 1e-14);
  REQUIRE(std::abs(brn.last_r.item() - std::sqrt(3.5) / 2) < 1e-15);
  REQUIRE(brn.last_d.item() == 0.5);
  // buffers as BatchNorm: 0.9·0.5 + 0.1·3 = 0.75; 0.9·4 + 0.1·(14/3) (unbiased) = 4.0666...
  REQUIRE(std::abs(brn.running_mean.item() - 0.75) < 1e-15);
  REQUIRE(std::abs(brn.running_var.item() - (3.6 + 1.4 / 3)) < 1e-14);
  REQUIRE(brn.batches_tracked() == 1);

  // r clipped from below: running_var 16 -> σ_run = 4, σ_B/σ_run = 0.468 < 1/1.2 -> r = 5/6;
  // d = (3 - 0.5)/4 = 0.625 -> 0.5 (running_mean reset to 0.5). y = 2·(x̂·5/6 + 0.5) + 0.5.
  brn.set_clipping(1.2, 0.5);
  brn.running_mean.fill_(0.5);
  brn.running_var.fill_(16.0);
  std::vector<double> want;
  for (double v : {1.0, 2.0, 3.0, 6.0}) want.push_back(2 * ((v - 3) / std::sqrt(3.5) * 5 / 6 + 0.5) + 0.5);
  require_close(brn.forward(x), Tensor::from_vector(want, {4, 1}, Dtype::Float64), 1e-14);
  REQUIRE(std::abs(brn.last_r.item() - 5.0 / 6) < 1e-15);

  // gradients with r, d constant: dγ = Σ dy·(x̂·r + d), dβ = Σ dy,
  // dx = γ·r/σ_B·(dy - mean(dy) - x̂·mean(dy·x̂))
  brn.running_mean.fill_(0.5);
  brn.running_var.fill_(4.0);
  brn.set_clipping(1.5, 0.5);
  brn.zero_grad();
  Tensor xg = x.clone().requires_grad_();
  const std::vector<double> dy{1, -1, 0.5, 2};
  brn.forward(xg).backward(Tensor::from_vector(dy, {4, 1}, Dtype::Float64));
  const double sb = std::sqrt(3.5), r = sb / 2;
  double sdy = 0, sdyxh = 0, dgamma = 0;
  const double xs[4] = {1, 2, 3, 6};
  for (int i = 0; i < 4; ++i) {
    const double xh = (xs[i] - 3) / sb;
    sdy += dy[i];
    sdyxh += dy[i] * xh;
    dgamma += dy[i] * (xh * r + 0.5);
  }
  REQUIRE(std::abs(brn.weight.grad().item() - dgamma) < 1e-13);
  REQUIRE(std::abs(brn.bias.grad().item() - sdy) < 1e-13);
  for (int i = 0; i < 4; ++i) {
    const double xh = (xs[i] - 3) / sb;
    const double want_dx = 2 * r / sb * (dy[i] - sdy / 4 - xh * sdyxh / 4);
    REQUIRE(std::abs(xg.grad().at(i) - want_dx) < 1e-13);
  }
}

TEST_CASE("BatchRenorm gradcheck in train and eval mode, 1d and 2d", "[norms][gradcheck]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  SECTION("1d (N, C), r and d on tight bounds") {
    BatchRenorm1d brn(3, f64(), 1.1, 0.05);
    gradcheck_renorm(brn, rand64({5, 3}, 100, -2, 2), 100.0);
  }
  SECTION("1d (N, C, L), a constant feature and a batch of two") {
    BatchRenorm1d brn(2, f64(), 3.0, 5.0);
    gradcheck_renorm(brn, Tensor::from_vector({0.7, 0.7, 0.3, -1.0, 0.7, 0.7, 2.0, 0.5}, {2, 2, 2}, Dtype::Float64), -200.0);
  }
  SECTION("2d (N, C, H, W), no affine") {
    BatchRenorm2d brn(2, f64(1e-5, false), 2.0, 1.0);
    gradcheck_renorm(brn, rand64({2, 2, 2, 2}, 101), 50.0);
  }
}

TEST_CASE("BatchRenorm refuses bad clipping and one value per channel", "[norms]") {
  REQUIRE_THROWS_WITH(BatchRenorm1d(2, {}, 0.5, 1.0), Catch::Contains("rmax") && Catch::Contains("0.5"));
  REQUIRE_THROWS_WITH(BatchRenorm1d(2, {}, 2.0, -1.0), Catch::Contains("dmax"));
  BatchRenorm1d brn(2, f64());
  REQUIRE_THROWS_WITH(brn.set_clipping(0.9, 0.0), Catch::Contains("rmax"));
  REQUIRE(brn.rmax() == 3.0);
  REQUIRE_THROWS_WITH(brn.forward(Tensor::ones({1, 2}, Dtype::Float64)), Catch::Contains("more than 1 value"));
  REQUIRE(brn.batches_tracked() == 0);
  REQUIRE(brn.running_mean.to_vector() == std::vector<double>{0, 0});
  REQUIRE_THROWS_WITH(brn.forward(Tensor::ones({4, 3}, Dtype::Float64)), Catch::Contains("[4, 3]"));
  REQUIRE(brn.type_name() == "BatchRenorm1d");
  REQUIRE(brn.extra_repr().find("rmax=3") != std::string::npos);
}

TEST_CASE("BatchRenorm clipping can be scheduled between steps (paper: rmax 1 -> 3, dmax 0 -> 5)", "[norms]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  BatchRenorm1d brn(1, f64(0.0), 1.0, 0.0);
  Tensor x = Tensor::from_vector({1, 2, 3, 6}, {4, 1}, Dtype::Float64);  // μ_B = 3, σ_B = sqrt(3.5)
  for (int step = 0; step <= 4; ++step) {
    const double rmax = 1.0 + 0.5 * step, dmax = 1.25 * step;
    brn.set_clipping(rmax, dmax);
    brn.running_mean.fill_(0.0);
    brn.running_var.fill_(16.0);  // σ_run = 4: unclipped r = sqrt(3.5)/4 = 0.468, d = 0.75
    brn.forward(x);
    INFO("step " << step);
    REQUIRE(brn.last_r.item() == Approx(std::max(std::sqrt(3.5) / 4, 1 / rmax)).epsilon(1e-14));
    REQUIRE(brn.last_d.item() == Approx(std::min(0.75, dmax)).epsilon(1e-14));
  }
}

TEST_CASE("errors: BatchNorm1d/2d name the expected rank or channels and the input shape", "[errors]") {
  BatchNorm1d bn1(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32({2, 4})); }),
             Contains("BatchNorm1d") && Contains("expected 3 channels") && Contains("[2, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32({2, 3, 4, 4})); }),
             Contains("2D (N, C) or 3D (N, C, L)") && Contains("4D") && Contains("[2, 3, 4, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32({3})); }), Contains("1D") && Contains("[3]"));
  BatchNorm2d bn2(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn2(f32({2, 3, 4})); }),
             Contains("BatchNorm2d") && Contains("4D (N, C, H, W)") && Contains("3D") && Contains("[2, 3, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn2(f32({2, 5, 4, 4})); }),
             Contains("expected 3 channels") && Contains("[2, 5, 4, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(Tensor::ones({2, 3}, Dtype::Float64)); }),
             Contains("float64") && Contains("float32"));
  // Nothing above touched the running statistics.
  CHECK(bn1.batches_tracked() == 0);
  CHECK(bn2.batches_tracked() == 0);
}

TEST_CASE("errors: BatchNorm options out of range name the value", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm1d(0); }), Contains("num_features") && Contains("0"));
  BatchNormOptions o;
  o.momentum = 1.5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm1d(3, o); }),
             Contains("momentum must be in [0, 1]") && Contains("1.5"));
  o.momentum = -0.1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm1d(3, o); }), Contains("-0.1"));
  o.momentum = 0.1;
  o.eps = -1e-5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm2d(3, o); }), Contains("eps must be >= 0"));
  // A Keras decay is not a momentum: decay 0.99 is momentum 0.01, and decay 1.5 is refused.
  CHECK(momentum_from_decay(0.99) == Approx(0.01));
  CHECK_THAT(thrown<std::invalid_argument>([&] { momentum_from_decay(1.5); }), Contains("[0, 1]") && Contains("1.5"));
}

TEST_CASE("errors: BatchNorm training with one value per channel, or an empty batch, changes nothing", "[errors]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  // PyTorch: "Expected more than 1 value per channel when training" for (1, C) and
  // (1, C, 1); tapegrad also refuses the empty batch (PyTorch would count it in
  // num_batches_tracked). Each leaves running_mean, running_var and num_batches_tracked as
  // they were.
  BatchNorm1d bn1(3);
  BatchNorm2d bn2(3);
  const StateDict before1 = state_snapshot(bn1), before2 = state_snapshot(bn2);
  for (const Shape& s : {Shape{1, 3}, Shape{1, 3, 1}, Shape{0, 3}, Shape{0, 3, 5}})
    CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32(s, 2.0)); }),
               Contains("more than 1 value per channel") && Contains(shape_str(s)) && Contains("eval()"));
  for (const Shape& s : {Shape{1, 3, 1, 1}, Shape{0, 3, 2, 2}})
    CHECK_THAT(thrown<std::invalid_argument>([&] { bn2(f32(s, 2.0)); }),
               Contains("more than 1 value per channel") && Contains(shape_str(s)));
  CHECK(same_state(state_snapshot(bn1), before1));
  CHECK(same_state(state_snapshot(bn2), before2));
  CHECK(bn1.batches_tracked() == 0);
  // One sample with a length, (1, C, L>1), has L values per channel: accepted (as PyTorch).
  bn1(f32({1, 3, 2}));
  CHECK(bn1.batches_tracked() == 1);
  // In eval mode one sample, and an empty batch, go through the running statistics.
  bn1.eval();
  CHECK(bn1(f32({1, 3})).shape() == Shape{1, 3});
  CHECK(bn1(f32({0, 3})).shape() == Shape{0, 3});
}
