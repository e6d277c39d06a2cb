// Core: tensors, broadcasting, the tape, and gradcheck of every skeleton op.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include "test_ops_support.h"

using namespace tapegrad;
using ops_test::leaf;
using ops_test::require_gradcheck;

TEST_CASE("tensor basics: shape, dtype, views share storage", "[core]") {
  Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float64);
  REQUIRE(t.dtype() == Dtype::Float64);
  REQUIRE(t.shape() == Shape{2, 3});
  REQUIRE(t.numel() == 6);
  REQUIRE(t.size(-1) == 3);
  Tensor r = reshape(t, {3, -1});
  REQUIRE(r.shape() == Shape{3, 2});
  REQUIRE(r.shares_storage_with(t));
  Tensor f = t.to(Dtype::Float32);
  REQUIRE(f.dtype() == Dtype::Float32);
  REQUIRE(f.at(5) == 6.0f);
  REQUIRE_THROWS_WITH(reshape(t, {4, 2}), Catch::Contains("[4, 2]") && Catch::Contains("[2, 3]"));
}

TEST_CASE("broadcasting add/mul and shape errors naming both shapes", "[core]") {
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float64);
  Tensor b = Tensor::from_vector({10, 20, 30}, {3}, Dtype::Float64);
  Tensor c = Tensor::from_vector({100, 200}, {2, 1}, Dtype::Float64);
  REQUIRE((a + b).to_vector() == std::vector<double>{11, 22, 33, 14, 25, 36});
  REQUIRE((a * c).to_vector() == std::vector<double>{100, 200, 300, 800, 1000, 1200});
  REQUIRE((b + c).shape() == Shape{2, 3});
  Tensor bad = Tensor::from_vector({1, 2}, {2}, Dtype::Float64);
  REQUIRE_THROWS_WITH(a + bad, Catch::Contains("[2, 3]") && Catch::Contains("[2]"));
  REQUIRE_THROWS_WITH(a + a.to(Dtype::Float32), Catch::Contains("float64") && Catch::Contains("float32"));
}

TEST_CASE("sum and mean over axes", "[core]") {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}, Dtype::Float64);
  REQUIRE(sum(x).item() == 78);
  REQUIRE(sum(x, {0}).to_vector() == std::vector<double>{8, 10, 12, 14, 16, 18});
  REQUIRE(sum(x, {0, 2}).to_vector() == std::vector<double>{1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12});
  REQUIRE(sum(x, {1}, true).shape() == Shape{2, 1, 2});
  REQUIRE(mean(x, {-1}).to_vector() == std::vector<double>{1.5, 3.5, 5.5, 7.5, 9.5, 11.5});
}

TEST_CASE("matmul and linear values", "[core]") {
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float64);
  Tensor b = Tensor::from_vector({1, 0, 0, 1, 1, 1}, {3, 2}, Dtype::Float64);
  REQUIRE(matmul(a, b).to_vector() == std::vector<double>{4, 5, 10, 11});
  Tensor w = Tensor::from_vector({1, 0, 1, 0, 1, 0}, {2, 3}, Dtype::Float64);
  Tensor bias = Tensor::from_vector({0.5, -0.5}, {2}, Dtype::Float64);
  REQUIRE(linear(a, w, bias).to_vector() == std::vector<double>{4.5, 1.5, 10.5, 4.5});
  REQUIRE_THROWS_WITH(matmul(a, a), Catch::Contains("[2, 3] @ [2, 3]"));
}

TEST_CASE("backward accumulates through a shared input and frees the graph", "[core][autograd]") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = sum(x * x + x);  // dy/dx = 2x + 1
  y.backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{3, 5, 7});
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("second time"));
  Tensor z = sum(x * 2.0);
  z.backward(Tensor(), true);
  z.backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{7, 9, 11});  // 3+2+2 ...
  REQUIRE(autograd::tape_size() == 0);
}

TEST_CASE("NoGradGuard records nothing; detach cuts the graph", "[core][autograd]") {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard ng;
    Tensor y = x * x;
    REQUIRE_FALSE(y.requires_grad());
  }
  Tensor d = x.detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.shares_storage_with(x));
  Tensor v = x * x;
  REQUIRE_THROWS_WITH(v.backward(), Catch::Contains("one-element"));
}

TEST_CASE("gradcheck: binary ops with broadcasting", "[core][gradcheck]") {
  Tensor a = ops_test::rand_leaf({3, 4}, 1), b = ops_test::rand_leaf({4}, 2), c = ops_test::rand_leaf({3, 1}, 3, 0.5, 2.0);
  require_gradcheck([](const std::vector<Tensor>& v) { return add(v[0], v[1]); }, {a, b});
  require_gradcheck([](const std::vector<Tensor>& v) { return sub(v[0], v[1]); }, {a, c});
  require_gradcheck([](const std::vector<Tensor>& v) { return mul(v[0], v[1]); }, {a, b});
  require_gradcheck([](const std::vector<Tensor>& v) { return div(v[0], v[1]); }, {a, c});
}

TEST_CASE("gradcheck: unary ops, reductions, shape ops", "[core][gradcheck]") {
  Tensor a = ops_test::rand_leaf({2, 3, 4}, 4);
  Tensor p = ops_test::rand_leaf({5}, 5, 0.5, 2.0);
  require_gradcheck([](const std::vector<Tensor>& v) { return neg(v[0]); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return square(v[0]); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return pow(v[0], 1.5); }, {p});
  require_gradcheck([](const std::vector<Tensor>& v) { return relu(v[0]); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return add(v[0], 3.0); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return sum(v[0], {0, 2}, true); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return mean(v[0], {1}); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return sum(v[0]); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return reshape(v[0], {4, 6}); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return transpose(v[0], 0, 2); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return permute(v[0], {1, 2, 0}); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return broadcast_to(v[0], {3, 5}); }, {p});
}

TEST_CASE("gradcheck: matmul and linear (rank 2 and 3, with and without bias)", "[core][gradcheck]") {
  Tensor a = ops_test::rand_leaf({3, 4}, 6), b = ops_test::rand_leaf({4, 2}, 7);
  require_gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, b});
  Tensor x = ops_test::rand_leaf({2, 3, 4}, 8), w = ops_test::rand_leaf({5, 4}, 9), bias = ops_test::rand_leaf({5}, 10);
  require_gradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, w, bias});
  require_gradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1]); }, {x, w});
  // large enough to take the BLAS path
  Tensor xl = ops_test::rand_leaf({64, 96}, 11), wl = ops_test::rand_leaf({128, 96}, 12);
  Tensor y1 = linear(xl, wl);
  Tensor y2 = matmul(xl, transpose(wl, 0, 1));
  auto v1 = y1.to_vector(), v2 = y2.to_vector();
  for (std::size_t i = 0; i < v1.size(); ++i) REQUIRE(v1[i] == Approx(v2[i]).epsilon(1e-12));
}
