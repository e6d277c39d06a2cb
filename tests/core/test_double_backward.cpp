// Second derivatives of every core op family: gradgradcheck (finite differences of the
// create_graph vector-Jacobian product), and third derivatives where the math allows.
#include <catch2/catch.hpp>

#include <cmath>

#include "test_ops_support.h"

using namespace tapegrad;
using ops_test::rand_leaf;
using ops_test::require_close;
using ops_test::require_gradgradcheck;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs kept away from the kinks of piecewise-linear ops (finite differences there are wrong).
Tensor away_from_zero(const Shape& s, std::uint64_t seed) {
  Tensor t = tapegrad::test::rand64(s, seed, 0.2, 1.0);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (i % 2) p[i] = -p[i];
  t.requires_grad_();
  return t;
}
}  // namespace

TEST_CASE("gradgradcheck: element-wise binary ops with broadcasting", "[core][double_backward]") {
  Tensor a = rand_leaf({3, 4}, 1), b = rand_leaf({4}, 2), c = rand_leaf({3, 1}, 3, 0.5, 1.5);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(v[0], v[1]); }, {a, b});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return div(v[0], v[1]); }, {a, c});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return add(v[0], v[1]); }, {a, b});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return sub(mul(v[0], v[0]), v[1]); }, {a, b});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(add(v[0], 2.0), -3.0); }, {a});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(v[0]); }, {a});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return pow(v[0], 3.0); }, {a});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return pow(v[0], 2.5); }, {c});
}

TEST_CASE("gradgradcheck: unary math and activations", "[core][double_backward]") {
  Tensor x = rand_leaf({2, 5}, 4), pos = rand_leaf({2, 5}, 5, 0.3, 2.0), k = away_from_zero({2, 5}, 6);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return exp(v[0]); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return log(v[0]); }, {pos});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return sqrt(v[0]); }, {pos});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return rsqrt(v[0]); }, {pos});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return erf(v[0]); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(abs(v[0]), v[0]); }, {k});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(clamp(v[0], -0.5, 0.5), v[0]); }, {k});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return sigmoid(v[0]); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return tanh(v[0]); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return gelu(v[0]); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return gelu(v[0], true); }, {x});
  // piecewise-linear ops: the second derivative is zero, but it flows through the mask times x
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(relu(v[0]), v[0]); }, {k});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(leaky_relu(v[0], 0.1), v[0]); }, {k});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(relu_clamp(v[0], 0.0, 0.6), v[0]); }, {k});
}

TEST_CASE("gradgradcheck: reductions, matmul, linear, softmax family", "[core][double_backward]") {
  Tensor x = rand_leaf({3, 4}, 7), w = rand_leaf({5, 4}, 8), bias = rand_leaf({5}, 9), m = rand_leaf({4, 2}, 10);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(sum(v[0], {1}, true)); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(mean(v[0], {0}), sum(v[0])); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(broadcast_to(v[0], {2, 3, 4})); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {x, m});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return tanh(linear(v[0], v[1], v[2])); }, {x, w, bias});
  Tensor x3 = rand_leaf({2, 3, 4}, 11);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return tanh(linear(v[0], v[1], v[2])); }, {x3, w, bias});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return softmax(v[0], 1); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return softmax(v[0], 0); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return log_softmax(v[0], 1); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return logsumexp(v[0], 1, false); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(max(v[0], 1, false), sum(v[0], {1})); }, {x});
  Tensor y = rand_leaf({3, 4}, 12);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(maximum(v[0], v[1]), v[0]); }, {x, y});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return mul(minimum(v[0], v[1]), v[1]); }, {x, y});
}

TEST_CASE("gradgradcheck: views, shape ops, cat, where, masked_fill, dtype casts", "[core][double_backward]") {
  Tensor x = rand_leaf({3, 4}, 13), y = rand_leaf({2, 4}, 14);
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(reshape(v[0], {4, 3})); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(transpose(v[0], 0, 1)); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(unsqueeze(flatten(v[0]), 0)); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(slice(v[0], 1, 0, 4, 2)); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(narrow(v[0], 0, 1, 2)); }, {x});
  require_gradgradcheck([](const std::vector<Tensor>& v) { return square(cat({v[0], v[1]}, 0)); }, {x, y});
  Tensor cond = Tensor::from_vector({1, 0, 1, 0}, {4}, Dtype::Float64);
  require_gradgradcheck([cond](const std::vector<Tensor>& v) { return square(where(cond, v[0], mul(v[0], 2.0))); },
                        {x});
  require_gradgradcheck([cond](const std::vector<Tensor>& v) { return square(masked_fill(v[0], cond, 0.5)); }, {x});
  // a float32 round trip is too coarse for finite differences: a worked example instead
  Tensor c = ops_test::leaf({0.5, -1.25}, {2});
  autograd::GradOptions cg;
  cg.create_graph = true;
  Tensor g = autograd::grad({sum(pow(c.to(Dtype::Float32), 3.0))}, {c}, {}, cg)[0];  // 3c²
  REQUIRE(g.dtype() == Dtype::Float64);
  require_close(g, {0.75, 4.6875});
  require_close(autograd::grad({sum(g)}, {c})[0], {3.0, -7.5});  // 6c
}

TEST_CASE("third derivatives: worked examples", "[core][double_backward]") {
  // f = x^4: f' = 4x³, f'' = 12x², f''' = 24x
  Tensor x = ops_test::leaf({0.5, -1.5, 2.0}, {3});
  autograd::GradOptions cg;
  cg.create_graph = true;
  Tensor y = sum(pow(x, 4.0));
  Tensor g1 = autograd::grad({y}, {x}, {}, cg)[0];
  require_close(g1, {0.5, -13.5, 32.0});
  Tensor g2 = autograd::grad({sum(g1)}, {x}, {}, cg)[0];
  require_close(g2, {3.0, 27.0, 48.0});
  Tensor g3 = autograd::grad({sum(g2)}, {x}, {})[0];
  require_close(g3, {12.0, -36.0, 48.0});
  // tanh: t' = 1 - t², t'' = -2t(1 - t²), t''' = -2(1 - t²)(1 - 3t²)
  Tensor z = ops_test::leaf({0.3}, {1});
  Tensor t1 = autograd::grad({sum(tanh(z))}, {z}, {}, cg)[0];
  Tensor t2 = autograd::grad({sum(t1)}, {z}, {}, cg)[0];
  Tensor t3 = autograd::grad({sum(t2)}, {z}, {})[0];
  const double t = std::tanh(0.3);
  require_close(t1, {1 - t * t}, 1e-14);
  require_close(t2, {-2 * t * (1 - t * t)}, 1e-14);
  require_close(t3, {-2 * (1 - t * t) * (1 - 3 * t * t)}, 1e-13);
  // softmax cross-entropy's Hessian in the logits: diag(p) - ppᵀ
  Tensor logits = ops_test::leaf({0.1, -0.4, 0.7}, {1, 3});
  Tensor loss = neg(narrow(log_softmax(logits, 1), 1, 2, 1));
  Tensor g = autograd::grad({sum(loss)}, {logits}, {}, cg)[0];
  const double e0 = std::exp(0.1), e1 = std::exp(-0.4), e2 = std::exp(0.7), s = e0 + e1 + e2;
  const double p[3] = {e0 / s, e1 / s, e2 / s};
  for (int j = 0; j < 3; ++j) {
    Tensor row = autograd::grad({sum(narrow(g, 1, j, 1))}, {logits}, {}, [] {
      autograd::GradOptions o;
      o.retain_graph = true;
      return o;
    }())[0];
    std::vector<double> want(3);
    for (int k = 0; k < 3; ++k) want[k] = (j == k ? p[j] : 0.0) - p[j] * p[k];
    require_close(row, want, 1e-13, 1e-15);
  }
}
