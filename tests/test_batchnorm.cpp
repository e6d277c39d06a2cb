// BatchNorm1d/2d: the chapter's worked examples, the backward guide's practice answers,
// gradcheck in train and eval mode, and the one-value-per-channel rule.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>

using namespace tapegrad;
using namespace tapegrad::layers;

namespace {
Tensor t64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s, Dtype::Float64); }
BatchNormOptions f64(double eps = 1e-5) {
  BatchNormOptions o;
  o.eps = eps;
  o.dtype = Dtype::Float64;
  return o;
}
void set(Tensor t, const std::vector<double>& v) {
  NoGradGuard ng;
  t.copy_(t64(v, t.shape()));
}
void require_close(const Tensor& got, const std::vector<double>& want, double atol) {
  auto g = got.to_vector();
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    REQUIRE(g[i] == Approx(want[i]).margin(atol).epsilon(0));
  }
}
}  // namespace

TEST_CASE("chapter worked example: 4x2 batch, eps = 0, forward and backward", "[batchnorm][textbook]") {
  BatchNorm1d bn(2, f64(0.0));
  set(bn.weight, {2, 0.5});
  set(bn.bias, {1, 0});
  Tensor x = t64({0, 1, 6, 5, 6, 1, 8, 5}, {4, 2}).requires_grad_();
  Tensor y = bn(x);
  // μ = (5, 3), σ² = (9, 4): x̂ col 0 = (-5, 1, 1, 3)/3, col 1 = (-1, 1, -1, 1)
  require_close(y, {2 * -5.0 / 3 + 1, -0.5, 2 * 1.0 / 3 + 1, 0.5, 2 * 1.0 / 3 + 1, -0.5, 2 * 3.0 / 3 + 1, 0.5}, 1e-12);
  y.backward(t64({1, 1, 0, 2, 2, 0, -1, 1}, {4, 2}));
  require_close(bn.weight.grad(), {-2, 2}, 1e-12);
  require_close(bn.bias.grad(), {2, 4}, 1e-12);
  require_close(x.grad(), {-2.0 / 9, 1.0 / 8, -2.0 / 9, 1.0 / 8, 10.0 / 9, -1.0 / 8, -6.0 / 9, -1.0 / 8}, 1e-12);
  // running stats after this batch (momentum 0.1, unbiased variance 12 and 16/3)
  require_close(bn.running_mean, {0.5, 0.3}, 1e-12);
  require_close(bn.running_var, {0.9 + 0.1 * 12, 0.9 + 0.1 * 16.0 / 3}, 1e-12);
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
  BatchNorm1d bn(1, f64());
  Tensor y = bn(t64({1, 2, 3}, {3, 1}));
  require_close(y, {-1.2247448713915890 * std::sqrt(2.0 / 3 / (2.0 / 3 + 1e-5)), 0.0,
                    1.2247448713915890 * std::sqrt(2.0 / 3 / (2.0 / 3 + 1e-5))}, 1e-12);
  REQUIRE(y.at(0) == Approx(-1.2247).margin(5e-5));
}

TEST_CASE("backward guide practice: (2,2,6,6), constant upstream, inference pass-through", "[batchnorm][textbook]") {
  BatchNorm1d bn(1, f64(0.0));
  Tensor x = t64({2, 2, 6, 6}, {4, 1}).requires_grad_();
  Tensor y = bn(x);
  require_close(y, {-1, -1, 1, 1}, 1e-12);  // μ = 4, σ² = 4
  y.backward(t64({3, 3, 3, 3}, {4, 1}));
  require_close(x.grad(), {0, 0, 0, 0}, 1e-12);  // a constant upstream gradient is absorbed by the mean
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
  require_close(xi.grad(), {1, -2, 0, 4}, 1e-12);  // γ/sqrt(var) = 3/3 = 1
}

TEST_CASE("batch of one in train mode throws and changes nothing; eval mode works", "[batchnorm]") {
  for (auto momentum : {std::optional<double>(0.1), std::optional<double>()}) {
    BatchNormOptions o = f64();
    o.momentum = momentum;
    BatchNorm1d bn(3, o);
    Tensor x = t64({0.5, -1, 2}, {1, 3});
    REQUIRE_THROWS_WITH(bn(x), Catch::Contains("more than 1 value per channel") && Catch::Contains("[1, 3]"));
    REQUIRE(bn.batches_tracked() == 0);
    require_close(bn.running_mean, {0, 0, 0}, 0);
    require_close(bn.running_var, {1, 1, 1}, 0);
    bn.eval();
    require_close(bn(x), {0.5 / std::sqrt(1 + 1e-5), -1 / std::sqrt(1 + 1e-5), 2 / std::sqrt(1 + 1e-5)}, 1e-12);
    bn.train();
    bn(t64({0, 0, 0, 2, 0, 4}, {2, 3}));
    REQUIRE(bn.batches_tracked() == 1);
  }
  // (N, C, L) with N = 1 but L > 1 has more than one value per channel: allowed
  BatchNorm1d bn(2, f64());
  REQUIRE_NOTHROW(bn(t64({1, 2, 3, 4}, {1, 2, 2})));
}

TEST_CASE("momentum unset is a cumulative average; Keras decay converts explicitly", "[batchnorm]") {
  BatchNormOptions o = f64();
  o.momentum = std::nullopt;
  BatchNorm1d bn(1, o);
  bn(t64({0, 2}, {2, 1}));   // mean 1, unbiased var 2
  bn(t64({4, 6}, {2, 1}));   // mean 5, var 2
  bn(t64({1, 1, 4}, {3, 1}));  // mean 2, var 3
  require_close(bn.running_mean, {(1 + 5 + 2) / 3.0}, 1e-12);
  require_close(bn.running_var, {(2 + 2 + 3) / 3.0}, 1e-12);
  REQUIRE(momentum_from_decay(0.99) == Approx(0.01));
  REQUIRE(decay_from_momentum(0.1) == Approx(0.9));
  REQUIRE_THROWS_WITH(momentum_from_decay(1.5), Catch::Contains("1.5"));
  BatchNormOptions bad;
  bad.momentum = 0.99 + 0.02;
  REQUIRE_THROWS_WITH(BatchNorm1d(2, bad), Catch::Contains("momentum"));
}

TEST_CASE("gradcheck: BatchNorm1d/2d train and eval, with a constant feature and a batch of two", "[batchnorm][gradcheck]") {
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
  require_close(y, {0.3, -0.6677749739576688, 0.3, -0.1811107105653812, 0.3, 0.5488856845230502}, 1e-12);
  require_close(x.grad(), {0, 0.22091996167149902, 0, -0.3681999361191649, 0, 0.14727997444766594}, 1e-12);
  require_close(bn.weight.grad(), {0, -1.7844356324383874}, 1e-12);
  require_close(bn.bias.grad(), {4.5, 1.25}, 1e-12);
  require_close(bn.running_var, {0.9, 1.5333333333333332}, 1e-12);
}
