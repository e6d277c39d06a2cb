// autograd::grad, backward(create_graph), Hessian-vector products: PyTorch's semantics.
#include <catch2/catch.hpp>

#include <thread>

#include "test_ops_support.h"

using namespace tapegrad;
using ops_test::leaf;
using ops_test::require_close;

namespace {
autograd::GradOptions create_graph() {
  autograd::GradOptions o;
  o.create_graph = true;
  return o;
}
}  // namespace

TEST_CASE("grad returns d(sum outputs·grad_outputs)/d inputs and never touches .grad", "[core][grad]") {
  Tensor x = leaf({1.0, 2.0, 3.0}, {3}), w = leaf({0.5, -1.0, 2.0}, {3});
  w.set_grad(Tensor::from_vector({7, 7, 7}, {3}, Dtype::Float64));
  Tensor y = mul(mul(x, x), w);  // y_i = x_i² w_i
  auto g = autograd::grad({y}, {x, w}, {Tensor::from_vector({1, 10, 100}, {3}, Dtype::Float64)});
  require_close(g[0], {1.0, -40.0, 1200.0});  // 2 x w · go
  require_close(g[1], {1.0, 40.0, 900.0});    // x² · go
  REQUIRE_FALSE(x.grad().defined());
  require_close(w.grad(), {7, 7, 7});
  REQUIRE_FALSE(g[0].requires_grad());
  // a one-element output needs no grad_output; several outputs add up
  Tensor s1 = sum(mul(x, 2.0)), s2 = sum(square(x));
  auto h = autograd::grad({s1, s2}, {x});
  require_close(h[0], {4.0, 6.0, 8.0});
}

TEST_CASE("grad: unreached inputs, freed graphs, bad arguments", "[core][grad]") {
  Tensor x = leaf({1.0, 2.0}, {2}), unused = leaf({3.0}, {1});
  Tensor y = sum(square(x));
  try {
    autograd::grad({y}, {x, unused});
    FAIL("expected an error for the unreached input");
  } catch (const std::invalid_argument& e) {
    REQUIRE(std::string(e.what()).find("input 1") != std::string::npos);
  }
  autograd::GradOptions allow;
  allow.allow_unused = true;
  allow.retain_graph = true;
  auto g = autograd::grad({y}, {x, unused}, {}, allow);
  require_close(g[0], {2.0, 4.0});
  REQUIRE_FALSE(g[1].defined());
  auto again = autograd::grad({y}, {x});  // retain_graph unset: freed afterwards
  require_close(again[0], {2.0, 4.0});
  REQUIRE_THROWS_WITH(autograd::grad({y}, {x}), Catch::Contains("second time"));
  Tensor z = sum(square(x));
  Tensor nograd = Tensor::ones({2}, Dtype::Float64);
  REQUIRE_THROWS_AS(autograd::grad({z}, {nograd}), std::invalid_argument);
  Tensor v = square(x);
  REQUIRE_THROWS_WITH(autograd::grad({v}, {x}), Catch::Contains("one-element"));
  REQUIRE_THROWS_WITH(autograd::grad({v}, {x}, {Tensor::ones({3}, Dtype::Float64)}),
                      Catch::Contains("grad_output 0 has shape [3]"));
  // a gradient without create_graph has no graph: differentiating it says why
  Tensor first = autograd::grad({sum(square(x))}, {x})[0];
  REQUIRE_THROWS_WITH(autograd::grad({sum(first)}, {x}), Catch::Contains("create_graph"));
}

TEST_CASE("grad with respect to an intermediate tensor", "[core][grad]") {
  Tensor x = leaf({1.0, -2.0}, {2});
  Tensor h = mul(x, 3.0);
  Tensor y = sum(square(h));
  auto g = autograd::grad({y}, {h, x});
  require_close(g[0], {6.0, -12.0});   // 2h
  require_close(g[1], {18.0, -36.0});  // 2h·3
}

TEST_CASE("backward(create_graph): .grad carries a graph, freed with it", "[core][grad]") {
  const std::size_t before = autograd::tape_size();
  {
    Tensor x = leaf({0.5, 1.5}, {2});
    Tensor y = sum(pow(x, 3.0));
    y.backward({}, false, true);
    Tensor gx = x.grad();
    REQUIRE(gx.requires_grad());
    require_close(gx, {0.75, 6.75});  // 3x²
    Tensor gg = autograd::grad({sum(gx)}, {x})[0];
    require_close(gg, {3.0, 9.0});  // 6x
    x.zero_grad();
    REQUIRE_FALSE(x.grad().defined());
  }
  REQUIRE(autograd::tape_size() == before);
  // grad(create_graph): the graph goes with the last handle on its results
  {
    Tensor x = leaf({0.5, 1.5}, {2});
    Tensor g = autograd::grad({sum(exp(x))}, {x}, {}, create_graph())[0];
    REQUIRE(autograd::tape_size() > before);
    Tensor gg = autograd::grad({sum(g)}, {x})[0];
    require_close(gg, {std::exp(0.5), std::exp(1.5)}, 1e-14);
  }
  REQUIRE(autograd::tape_size() == before);
}

TEST_CASE("a gradient penalty: d/dw of ||d out/d x||²", "[core][grad]") {
  // out = Σ tanh(x·w) over a batch of 1; d out/d x_j = w_j (1 - t²), t = tanh(x·w)
  Tensor x = leaf({0.3, -0.2}, {1, 2}), w = leaf({0.7, 0.4}, {2, 1});
  Tensor out = sum(tanh(matmul(x, w)));
  Tensor gx = autograd::grad({out}, {x}, {}, create_graph())[0];
  Tensor penalty = sum(square(gx));
  penalty.backward();
  // analytic: P = (1 - t²)² (w0² + w1²); dP/dw_k = 2(1-t²)² w_k + (w·w)·2(1-t²)(-2t)(1-t²) x_k
  const double z = 0.3 * 0.7 - 0.2 * 0.4, t = std::tanh(z), d = 1 - t * t, ww = 0.7 * 0.7 + 0.4 * 0.4;
  require_close(w.grad(), {2 * d * d * 0.7 - 4 * ww * t * d * d * 0.3, 2 * d * d * 0.4 - 4 * ww * t * d * d * -0.2},
                1e-12);
}

TEST_CASE("Hessian-vector products of a quadratic and of a small net", "[core][grad][hvp]") {
  // L = ½ xᵀ A x with A symmetric: H = A
  Tensor x = leaf({1.0, -2.0, 0.5}, {3, 1});
  Tensor A = Tensor::from_vector({2, 1, 0, 1, 3, -1, 0, -1, 4}, {3, 3}, Dtype::Float64);
  Tensor L = mul(sum(mul(x, matmul(A, x))), 0.5);
  Tensor v = Tensor::from_vector({1, 0, 2}, {3, 1}, Dtype::Float64);
  auto hv = autograd::hessian_vector_product(L, {x}, {v});
  require_close(hv[0], {2.0, -1.0, 8.0});
  // many products on one graph; the gradient is kept
  Tensor L2 = mul(sum(mul(x, matmul(A, x))), 0.5);
  autograd::HessianOperator H(L2, {x});
  require_close(H.gradient()[0], {0.0, -5.5, 4.0});  // A x
  for (int k = 0; k < 3; ++k) {
    std::vector<double> e(3, 0.0);
    e[k] = 1.0;
    auto col = H({Tensor::from_vector(e, {3, 1}, Dtype::Float64)});
    std::vector<double> want = {A.at(0 * 3 + k), A.at(1 * 3 + k), A.at(2 * 3 + k)};
    require_close(col[0], want);
  }
  REQUIRE_THROWS_WITH(H({Tensor::zeros({3}, Dtype::Float64)}), Catch::Contains("vector 0 must have shape [3, 1]"));
  // H·v against finite differences of the gradient: (g(θ + εv) - g(θ - εv)) / 2ε
  Tensor W = ops_test::rand_leaf({3, 2}, 21), b = ops_test::rand_leaf({3}, 22), in = tapegrad::test::rand64({4, 2}, 23);
  auto loss_of = [&] { return mean(square(tanh(linear(in, W, b)))); };
  Tensor vw = tapegrad::test::rand64({3, 2}, 24), vb = tapegrad::test::rand64({3}, 25);
  auto hvp = autograd::hessian_vector_product(loss_of(), {W, b}, {vw, vb});
  const double eps = 1e-6;
  auto grads_at = [&](double s) {
    NoGradGuard ng;  // shift the leaves in place, then put them back
    Tensor W0 = W.clone(), b0 = b.clone();
    for (std::int64_t i = 0; i < 6; ++i) W.data<double>()[i] = W0.at(i) + s * vw.at(i);
    for (std::int64_t i = 0; i < 3; ++i) b.data<double>()[i] = b0.at(i) + s * vb.at(i);
    std::vector<Tensor> g;
    {
      EnableGradGuard eg;
      g = autograd::grad({loss_of()}, {W, b});
    }
    for (std::int64_t i = 0; i < 6; ++i) W.data<double>()[i] = W0.at(i);
    for (std::int64_t i = 0; i < 3; ++i) b.data<double>()[i] = b0.at(i);
    return g;
  };
  auto gp = grads_at(eps), gm = grads_at(-eps);
  for (int k = 0; k < 2; ++k) {
    std::vector<double> fd;
    for (std::int64_t i = 0; i < gp[k].numel(); ++i) fd.push_back((gp[k].at(i) - gm[k].at(i)) / (2 * eps));
    require_close(hvp[k], fd, 1e-6, 1e-8);
  }
}

TEST_CASE("double backward: hooks, NoGradGuard and threads behave as in first order", "[core][grad]") {
  // NoGradGuard around the forward: nothing to differentiate
  Tensor x = leaf({1.0, 2.0}, {2});
  Tensor y;
  {
    NoGradGuard ng;
    y = sum(square(x));
  }
  REQUIRE_THROWS_AS(autograd::grad({y}, {x}, {}, create_graph()), std::invalid_argument);
  // each thread differentiates its own graph twice
  std::vector<double> results(2);
  std::vector<std::thread> ts;
  for (int k = 0; k < 2; ++k)
    ts.emplace_back([k, &results] {
      Tensor z = leaf({1.0 + k}, {1});
      Tensor g = autograd::grad({sum(pow(z, 3.0))}, {z}, {}, create_graph())[0];
      results[k] = autograd::grad({sum(g)}, {z})[0].item();  // 6z
    });
  for (auto& t : ts) t.join();
  REQUIRE(results[0] == 6.0);
  REQUIRE(results[1] == 12.0);
  // an in-place change of a tensor the double backward reads is caught
  Tensor w = leaf({1.0, 2.0}, {2});
  Tensor h = mul(w, 1.0);
  Tensor g = autograd::grad({sum(mul(h, h))}, {w}, {}, create_graph())[0];
  {
    NoGradGuard ng;
    h.data<double>()[0] = 5.0;
    h.impl()->storage->bump_version();
  }
  REQUIRE_THROWS_WITH(autograd::grad({sum(g)}, {w}), Catch::Contains("modified by an in-place operation"));
}
