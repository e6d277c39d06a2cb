// unsqueeze/squeeze/flatten/narrow/slice and cat/stack/where/masked_fill against PyTorch 1.13.
#include "test_ops_support.h"

using namespace ops_test;

namespace {
Tensor arange24() { return Tensor::from_vector(seq(24), {2, 3, 4}, Dtype::Float64); }  // torch.arange(24.).reshape(2,3,4)
}  // namespace

TEST_CASE("unsqueeze, squeeze and flatten are views with the right shapes", "[ops]") {
  Tensor x = arange24();
  Tensor u = unsqueeze(x, 1);
  REQUIRE(u.shape() == Shape{2, 1, 3, 4});
  REQUIRE(u.shares_storage_with(x));
  REQUIRE(unsqueeze(x, -1).shape() == Shape{2, 3, 4, 1});
  REQUIRE(unsqueeze(x, 3).shape() == Shape{2, 3, 4, 1});
  REQUIRE(squeeze(u).shape() == Shape{2, 3, 4});
  REQUIRE(squeeze(u, 1).shape() == Shape{2, 3, 4});
  REQUIRE(squeeze(u, 0).shape() == Shape{2, 1, 3, 4});  // size 2: unchanged, as torch
  REQUIRE(squeeze(Tensor::zeros({1, 1})).shape() == Shape{});
  Tensor f = flatten(x, 1);
  REQUIRE(f.shape() == Shape{2, 12});
  REQUIRE(f.shares_storage_with(x));
  REQUIRE(flatten(x).shape() == Shape{24});
  REQUIRE(flatten(x, 0, 1).shape() == Shape{6, 4});
  REQUIRE(flatten(Tensor::scalar(3.0, Dtype::Float64)).shape() == Shape{1});
  REQUIRE(f.to_vector() == x.to_vector());
  REQUIRE(unsqueeze(Tensor::from_int64({1, 2}, {2}), 0).shape() == Shape{1, 2});
  REQUIRE_THROWS_WITH(unsqueeze(x, 4), Catch::Contains("unsqueeze") && Catch::Contains("axis 4"));
  REQUIRE_THROWS_WITH(flatten(x, 2, 1), Catch::Contains("start_dim 2") && Catch::Contains("[2, 3, 4]"));
  // gradients flow back through the views unchanged in value
  Tensor a = rand_leaf({2, 3}, 51);
  require_gradcheck([](const std::vector<Tensor>& v) { return square(unsqueeze(v[0], 1)); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return flatten(squeeze(unsqueeze(v[0], 0))) * 3.0; }, {a});
}

TEST_CASE("narrow and slice match torch; dim-0 slices share storage", "[ops]") {
  Tensor x = arange24();
  // torch.narrow(x, 1, 1, 2)
  Tensor n1 = narrow(x, 1, 1, 2);
  REQUIRE(n1.shape() == Shape{2, 2, 4});
  REQUIRE(n1.to_vector() == std::vector<double>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23});
  // torch.narrow(x, 2, -2, 2)
  REQUIRE(narrow(x, 2, -2, 2).to_vector() == std::vector<double>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23});
  // x[:, :, 1::2] and x[:, -2:, :]
  REQUIRE(slice(x, 2, 1, std::nullopt, 2).to_vector() ==
          std::vector<double>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23});
  REQUIRE(slice(x, 1, -2, std::nullopt).to_vector() ==
          std::vector<double>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23});
  // Python clamping: x[:, 5:100] is empty, x[:, -100:1] is the first row
  REQUIRE(slice(x, 1, 5, 100).shape() == Shape{2, 0, 4});
  REQUIRE(slice(x, 1, -100, 1).shape() == Shape{2, 1, 4});
  // a dim-0 narrow is a view (like torch); the rest copy
  Tensor n0 = narrow(x, 0, 1, 1);
  REQUIRE(n0.shares_storage_with(x));
  REQUIRE(n0.to_vector() == seq(12, 12));
  REQUIRE_FALSE(n1.shares_storage_with(x));
  REQUIRE(narrow(Tensor::from_int64({1, 2, 3}, {3}), 0, 1, 2).to_vector() == std::vector<double>{2, 3});
  REQUIRE_THROWS_WITH(narrow(x, 1, 2, 2),
                      Catch::Contains("start 2") && Catch::Contains("length 2") && Catch::Contains("size 3"));
  REQUIRE_THROWS_WITH(slice(x, 0, 0, 1, 0), Catch::Contains("step must be >= 1, got 0"));
}

TEST_CASE("gradcheck: narrow and slice along each axis", "[ops][gradcheck]") {
  Tensor x = rand_leaf({3, 4, 5}, 52);
  require_gradcheck([](const std::vector<Tensor>& v) { return narrow(v[0], 0, 1, 2); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return narrow(v[0], 1, 1, 2); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return narrow(v[0], -1, 0, 3); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return slice(v[0], 2, 0, std::nullopt, 2); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return slice(v[0], 0, -2, std::nullopt, 1); }, {x});
  // the same input read through two overlapping slices accumulates
  require_gradcheck(
      [](const std::vector<Tensor>& v) { return narrow(v[0], 1, 0, 3) * narrow(v[0], 1, 1, 3); }, {x});
}

TEST_CASE("cat and stack match torch, with gradcheck", "[ops]") {
  Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, Dtype::Float64);
  Tensor b = Tensor::from_vector({5, 6, 7, 8, 9, 10}, {2, 3}, Dtype::Float64);
  // torch.cat([a, b], 1)
  Tensor c = cat({a, b}, 1);
  REQUIRE(c.shape() == Shape{2, 5});
  REQUIRE(c.to_vector() == std::vector<double>{1, 2, 5, 6, 7, 3, 4, 8, 9, 10});
  REQUIRE(cat({a, a}, 0).to_vector() == std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4});
  // torch.stack([a, a*10], 1) and torch.stack([a, a*10], 2)
  Tensor s1 = stack({a, a * 10.0}, 1);
  REQUIRE(s1.shape() == Shape{2, 2, 2});
  REQUIRE(s1.to_vector() == std::vector<double>{1, 2, 10, 20, 3, 4, 30, 40});
  REQUIRE(stack({a, a * 10.0}, -1).to_vector() == std::vector<double>{1, 10, 2, 20, 3, 30, 4, 40});
  REQUIRE(cat({Tensor::from_int64({1}, {1}), Tensor::from_int64({2, 3}, {2})}).to_vector() ==
          std::vector<double>{1, 2, 3});
  // errors name both shapes (and the offending tensor's index)
  REQUIRE_THROWS_WITH(cat({a, b}, 0),
                      Catch::Contains("tensor 1") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(stack({a, b}), Catch::Contains("[2, 3]") && Catch::Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(cat({a, a.to(Dtype::Float32)}), Catch::Contains("float32") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(cat({}), Catch::Contains("non-empty"));

  Tensor p = rand_leaf({2, 3}, 61), q = rand_leaf({2, 1}, 62), r = rand_leaf({2, 3}, 63);
  require_gradcheck([](const std::vector<Tensor>& v) { return cat({v[0], v[1], v[2]}, 1); }, {p, q, r});
  require_gradcheck([](const std::vector<Tensor>& v) { return cat({v[0], v[1]}, 0); }, {p, r});
  require_gradcheck([](const std::vector<Tensor>& v) { return stack({v[0], v[1]}, 1); }, {p, r});
  // only one input requires grad: the other gets none and nothing breaks
  Tensor fixed = Tensor::ones({2, 3}, Dtype::Float64);
  require_gradcheck([fixed](const std::vector<Tensor>& v) { return cat({fixed, v[0]}, 0); }, {p});
}

TEST_CASE("where with broadcasting and an int64 condition matches torch", "[ops]") {
  // torch.where(cond.bool(), A, B), cond = [[1,0,1],[0,0,1]], A (2,3), B (3); y.backward([[1,2,3],[4,5,6]])
  Tensor cond = Tensor::from_int64({1, 0, 1, 0, 0, 1}, {2, 3});
  Tensor A = leaf({1, 2, 3, 4, 5, 6}, {2, 3}), B = leaf({-1, -2, -3}, {3});
  Tensor y = where(cond, A, B);
  REQUIRE(y.to_vector() == std::vector<double>{1, -2, 3, -1, -2, 6});
  y.backward(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float64));
  require_close(A.grad(), {1, 0, 3, 0, 0, 6});
  require_close(B.grad(), {4, 7, 0});
  // a float condition (nonzero = true) broadcasting along rows
  Tensor fc = Tensor::from_vector({0.0, 1.0}, {2, 1}, Dtype::Float64);
  REQUIRE(where(fc, A.detach(), B.detach()).to_vector() == std::vector<double>{-1, -2, -3, 4, 5, 6});
  REQUIRE_THROWS_WITH(where(Tensor::zeros({4}), A, B),
                      Catch::Contains("[4]") && Catch::Contains("[2, 3]") && Catch::Contains("[3]"));
  Tensor a = rand_leaf({2, 3}, 71), b = rand_leaf({2, 1}, 72);
  require_gradcheck([cond](const std::vector<Tensor>& v) { return where(cond, v[0], v[1]); }, {a, b});
}

TEST_CASE("masked_fill matches torch; the mask broadcasts and blocks the gradient", "[ops]") {
  // X.masked_fill(tensor([0., 1., 0.]).bool(), -7.5); y.backward(2 * ones(2, 3))
  Tensor X = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = masked_fill(X, Tensor::from_vector({0, 1, 0}, {3}, Dtype::Float64), -7.5);
  REQUIRE(y.to_vector() == std::vector<double>{1, -7.5, 3, 4, -7.5, 6});
  y.backward(Tensor::full({2, 3}, 2.0, Dtype::Float64));
  require_close(X.grad(), {2, 0, 2, 2, 0, 2});
  REQUIRE(masked_fill(X.detach(), Tensor::from_int64({1, 0}, {2, 1}), 0.0).to_vector() ==
          std::vector<double>{0, 0, 0, 4, 5, 6});
  // the mask must broadcast to x's shape, not the other way round
  REQUIRE_THROWS_WITH(masked_fill(Tensor::zeros({3}, Dtype::Float64), Tensor::zeros({2, 3}), 1.0),
                      Catch::Contains("[2, 3]") && Catch::Contains("[3]"));
  Tensor m = Tensor::from_int64({0, 1, 1, 0, 0, 1}, {2, 3});
  Tensor a = rand_leaf({2, 3}, 73);
  require_gradcheck([m](const std::vector<Tensor>& v) { return masked_fill(v[0], m, 0.25) * v[0]; }, {a});
}
