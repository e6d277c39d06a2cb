// LayerNorm and GroupNorm: gradcheck in train and eval mode (including a constant
// group and a batch of two), invariances, independence of samples, errors.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/group_norm.h>
#include <tapegrad/layers/functional/layer_norm.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using namespace tapegrad::test;

TEST_CASE("LayerNorm gradcheck: one and two trailing dims, affine on/off, train and eval", "[norms][gradcheck]") {
  SECTION("normalized_shape (5), input (3, 5)") {
    LayerNorm ln({5}, 1e-5, true, true, Dtype::Float64);
    gradcheck_module(ln, rand64({3, 5}, 1), 99);
  }
  SECTION("normalized_shape (3, 4), input (2, 3, 4)") {
    LayerNorm ln({3, 4}, 1e-5, true, true, Dtype::Float64);
    gradcheck_module(ln, rand64({2, 3, 4}, 2), 99);
  }
  SECTION("no affine, input (2, 2, 3), eps 1e-3") {
    LayerNorm ln({3}, 1e-3, false, true, Dtype::Float64);
    REQUIRE(ln.parameters().empty());
    gradcheck_module(ln, rand64({2, 2, 3}, 3), 99);
  }
  SECTION("weight without bias") {
    LayerNorm ln({4}, 1e-5, true, false, Dtype::Float64);
    REQUIRE(ln.parameters().size() == 1);
    gradcheck_module(ln, rand64({2, 4}, 4), 99);
  }
  SECTION("a constant row (zero variance) and a batch of two rows") {
    LayerNorm ln({4}, 1e-5, true, true, Dtype::Float64);
    gradcheck_module(ln, Tensor::from_vector({2, 2, 2, 2, 0.5, -1, 3, 0.25}, {2, 4}, Dtype::Float64), 99);
  }
}

TEST_CASE("LayerNorm values: textbook [1, 2, 3] and a sample never sees its batch", "[norms]") {
  LayerNorm ln({3}, 1e-5, true, true, Dtype::Float64);
  // (x - 2)/sqrt(2/3 + 1e-5): the biased variance of [1, 2, 3] is 2/3
  const double s = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);
  require_close(ln.forward(Tensor::from_vector({1, 2, 3}, {1, 3}, Dtype::Float64)), Tensor::from_vector({-s, 0, s}, {1, 3}, Dtype::Float64));
  Tensor batch = rand64({5, 3}, 8);
  const auto bv = batch.to_vector();
  Tensor alone = Tensor::from_vector(std::vector<double>(bv.begin() + 6, bv.begin() + 9), {1, 3}, Dtype::Float64);
  auto all = ln.forward(batch).to_vector();
  auto one = ln.forward(alone).to_vector();
  for (int j = 0; j < 3; ++j) REQUIRE(all[6 + j] == one[j]);  // bit-identical, in train mode
  ln.eval();
  REQUIRE(ln.forward(batch).to_vector() == all);
}

TEST_CASE("LayerNorm is invariant to shifting and scaling a row at eps = 0", "[norms]") {
  Tensor x = rand64({3, 6}, 11);
  Tensor y = functional::layer_norm(x, {6}, Tensor(), Tensor(), 0.0);
  require_close(functional::layer_norm(x * 7.5 + 3.0, {6}, Tensor(), Tensor(), 0.0), y, 1e-12);
  // each row has mean 0 and biased variance 1
  auto v = y.to_vector();
  for (int r = 0; r < 3; ++r) {
    double m = 0, q = 0;
    for (int j = 0; j < 6; ++j) m += v[r * 6 + j] / 6;
    for (int j = 0; j < 6; ++j) q += (v[r * 6 + j] - m) * (v[r * 6 + j] - m) / 6;
    REQUIRE(std::abs(m) < 1e-15);
    REQUIRE(std::abs(q - 1) < 1e-14);
  }
}

TEST_CASE("LayerNorm errors name the expected and actual shapes", "[norms]") {
  LayerNorm ln({3, 4});
  REQUIRE_THROWS_WITH(ln.forward(Tensor::zeros({2, 4, 3})), Catch::Contains("[3, 4]") && Catch::Contains("[2, 4, 3]"));
  REQUIRE_THROWS_WITH(ln.forward(Tensor::zeros({4})), Catch::Contains("[3, 4]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(ln.forward(Tensor::zeros({2, 3, 4}, Dtype::Float64)), Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(LayerNorm(Shape{}), Catch::Contains("normalized_shape"));
  REQUIRE_THROWS_WITH(functional::layer_norm(Tensor::zeros({2, 3}), {3}, Tensor::ones({2})),
                      Catch::Contains("weight") && Catch::Contains("[2]") && Catch::Contains("[3]"));
  // rank == len(normalized_shape) is one group
  REQUIRE(ln.forward(Tensor::zeros({3, 4})).shape() == Shape{3, 4});
  REQUIRE(ln.state_dict().keys() == std::vector<std::string>{"weight", "bias"});
}

TEST_CASE("LayerNorm float32 agrees with float64", "[norms]") {
  Tensor x = rand64({4, 7}, 12, -50, 50);
  LayerNorm l64({7}, 1e-5, true, true, Dtype::Float64), l32({7});
  require_close(l32.forward(x.to(Dtype::Float32)).to(Dtype::Float64), l64.forward(x), 2e-6);
}

TEST_CASE("GroupNorm gradcheck: (N, C, L) and (N, C, H, W), groups 1, 2 and C", "[norms][gradcheck]") {
  SECTION("2 groups, (2, 4, 3)") {
    GroupNorm gn(2, 4, 1e-5, true, Dtype::Float64);
    gradcheck_module(gn, rand64({2, 4, 3}, 21), 99);
  }
  SECTION("1 group, (3, 4, 2, 2)") {
    GroupNorm gn(1, 4, 1e-5, true, Dtype::Float64);
    gradcheck_module(gn, rand64({2, 4, 2, 2}, 22), 99);
  }
  SECTION("C groups, no affine, (2, 3, 4)") {
    GroupNorm gn(3, 3, 1e-3, false, Dtype::Float64);
    gradcheck_module(gn, rand64({2, 3, 4}, 23), 99);
  }
  SECTION("(N, C) input, a constant group and a batch of two") {
    GroupNorm gn(2, 4, 1e-5, true, Dtype::Float64);
    gradcheck_module(gn, Tensor::from_vector({1.5, 1.5, -0.5, 2.0, 0.1, 0.7, 3.0, 3.0}, {2, 4}, Dtype::Float64), 99);
  }
}

TEST_CASE("GroupNorm with 1 group is LayerNorm over (C, L); with C groups it is InstanceNorm", "[norms]") {
  Tensor x = rand64({3, 4, 5}, 31);
  GroupNorm g1(1, 4, 1e-5, false, Dtype::Float64);
  require_close(g1.forward(x), functional::layer_norm(x, {4, 5}), 1e-13);
  GroupNorm gc(4, 4, 1e-5, true, Dtype::Float64);
  InstanceNormOptions o;
  o.affine = true;
  o.dtype = Dtype::Float64;
  InstanceNorm1d in(4, o);
  Tensor w = rand64({4}, 32), b = rand64({4}, 33);
  NoGradGuard ng;
  gc.weight.copy_(w);
  gc.bias.copy_(b);
  in.weight.copy_(w);
  in.bias.copy_(b);
  require_close(gc.forward(x), in.forward(x), 1e-13);
}

TEST_CASE("GroupNorm statistics are per (sample, group): hand example", "[norms]") {
  // C = 4 in 2 groups, L = 1: group 0 = channels {0, 1}, group 1 = {2, 3}
  // sample [1, 3, 10, 30]: group 0 mean 2 var 1 -> [-1, 1]; group 1 mean 20 var 100 -> [-1, 1]
  Tensor x = Tensor::from_vector({1, 3, 10, 30}, {1, 4}, Dtype::Float64);
  auto y = functional::group_norm(x, 2, Tensor(), Tensor(), 0.0).to_vector();
  REQUIRE(y == std::vector<double>{-1, 1, -1, 1});
  // per-channel affine applied after the group statistics
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {4}, Dtype::Float64), b = Tensor::from_vector({0, 0, 0, 0.5}, {4}, Dtype::Float64);
  require_close(functional::group_norm(x, 2, w, b, 0.0), Tensor::from_vector({-1, 2, -3, 4.5}, {1, 4}, Dtype::Float64), 1e-15);
}

TEST_CASE("GroupNorm errors: groups must divide channels; input channels must match", "[norms]") {
  REQUIRE_THROWS_WITH(GroupNorm(3, 4), Catch::Contains("divisible") && Catch::Contains("3") && Catch::Contains("4"));
  REQUIRE_THROWS_WITH(GroupNorm(0, 4), Catch::Contains("positive"));
  GroupNorm gn(2, 4);
  REQUIRE_THROWS_WITH(gn.forward(Tensor::zeros({2, 6, 3})), Catch::Contains("(N, 4, *)") && Catch::Contains("[2, 6, 3]"));
  REQUIRE_THROWS_WITH(gn.forward(Tensor::zeros({4})), Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(functional::group_norm(Tensor::zeros({2, 6}), 4), Catch::Contains("divisible"));
}

TEST_CASE("fused LayerNorm/GroupNorm equal their composition from primitive ops, 1 and 2 threads", "[norms]") {
  // Sizes past kParallelGrain so the threaded forward and backward paths run.
  const int saved = get_num_threads();
  const double eps = 1e-5;
  Tensor x0 = rand64({64, 1024}, 200, -3, 3), g = rand64({64, 1024}, 201);
  Tensor w0 = rand64({1024}, 202, 0.5, 1.5), b0 = rand64({1024}, 203);
  // composite reference: autograd through mean, sub, square, pow, mul, add
  Tensor xr = x0.clone().requires_grad_(), wr = w0.clone().requires_grad_(), br = b0.clone().requires_grad_();
  Tensor xc = xr - mean(xr, {-1}, true);
  Tensor yr = xc * pow(mean(square(xc), {-1}, true) + eps, -0.5) * wr + br;
  yr.backward(g);
  // GroupNorm reference on (8, 16, 512) in 4 groups, via a (N, G, K) view
  Tensor xg0 = rand64({8, 16, 512}, 204, -2, 2), gg = rand64({8, 16, 512}, 205);
  Tensor wg0 = rand64({16}, 206, 0.5, 1.5), bg0 = rand64({16}, 207);
  Tensor xgr = xg0.clone().requires_grad_(), wgr = wg0.clone().requires_grad_(), bgr = bg0.clone().requires_grad_();
  Tensor v = reshape(xgr, {8, 4, 2048});
  Tensor vc = v - mean(v, {-1}, true);
  Tensor n = reshape(vc * pow(mean(square(vc), {-1}, true) + eps, -0.5), {8, 16, 512});
  Tensor ygr = n * reshape(wgr, {16, 1}) + reshape(bgr, {16, 1});
  ygr.backward(gg);
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    set_num_threads(threads);
    Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    Tensor y = functional::layer_norm(x, {1024}, w, b, eps);
    require_close(y, yr.detach(), 1e-12);
    y.backward(g);
    require_close(x.grad(), xr.grad(), 1e-10);
    require_close(w.grad(), wr.grad(), 1e-10);
    require_close(b.grad(), br.grad(), 1e-10);
    Tensor xg = xg0.clone().requires_grad_(), wg = wg0.clone().requires_grad_(), bg = bg0.clone().requires_grad_();
    Tensor yg = functional::group_norm(xg, 4, wg, bg, eps);
    require_close(yg, ygr.detach(), 1e-12);
    yg.backward(gg);
    require_close(xg.grad(), xgr.grad(), 1e-10);
    require_close(wg.grad(), wgr.grad(), 1e-10);
    require_close(bg.grad(), bgr.grad(), 1e-10);
  }
  set_num_threads(saved);
}
