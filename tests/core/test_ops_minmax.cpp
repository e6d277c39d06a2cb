// maximum/minimum (broadcasting) and max/min/argmax/argmin over an axis, against PyTorch 1.13.
#include "test_ops_support.h"

using namespace ops_test;

namespace {
// x = torch.tensor([3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3,2,3,8,4,6,2,6,4.]).reshape(2,3,4)
Tensor x234() {
  return Tensor::from_vector({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4}, {2, 3, 4}, Dtype::Float64);
}
std::vector<double> ints(const Tensor& t) {
  REQUIRE(t.dtype() == Dtype::Int64);
  return t.to_vector();
}
}  // namespace

TEST_CASE("maximum/minimum broadcast (2,3) with (3); ties split the gradient", "[ops]") {
  // a = [[1,5,-2],[0.5,2,3]], b = [2,2,-1], g = [[1,2,3],[4,5,6]]
  const std::vector<double> av = {1, 5, -2, 0.5, 2, 3}, bv = {2, 2, -1}, gv = {1, 2, 3, 4, 5, 6};
  Tensor g = Tensor::from_vector(gv, {2, 3}, Dtype::Float64);
  {
    Tensor a = leaf(av, {2, 3}), b = leaf(bv, {3});
    Tensor y = maximum(a, b);  // torch.maximum(a, b); y.backward(g)
    REQUIRE(y.shape() == Shape{2, 3});
    require_close(y, {2.0, 5.0, -1.0, 2.0, 2.0, 3.0});
    y.backward(g);
    require_close(a.grad(), {0.0, 2.0, 0.0, 0.0, 2.5, 6.0});
    require_close(b.grad(), {5.0, 2.5, 3.0});
  }
  {
    Tensor a = leaf(av, {2, 3}), b = leaf(bv, {3});
    Tensor y = minimum(a, b);  // torch.minimum(a, b); y.backward(g)
    require_close(y, {1.0, 2.0, -2.0, 0.5, 2.0, -1.0});
    y.backward(g);
    require_close(a.grad(), {1.0, 0.0, 3.0, 4.0, 2.5, 0.0});
    require_close(b.grad(), {0.0, 4.5, 6.0});
  }
  // (2,1) with (1,3) -> (2,3); NaN propagates
  Tensor c = Tensor::from_vector({0, 10}, {2, 1}, Dtype::Float64), d = Tensor::from_vector({-1, 5, NAN}, {1, 3}, Dtype::Float64);
  Tensor m = maximum(c, d);
  REQUIRE(m.shape() == Shape{2, 3});
  auto mv = m.to_vector();
  REQUIRE(mv[0] == 0);
  REQUIRE(mv[1] == 5);
  REQUIRE(std::isnan(mv[2]));
  REQUIRE(mv[4] == 10);
  REQUIRE(std::isnan(minimum(d, c).at(5)));
}

TEST_CASE("maximum/minimum shape and dtype errors name both operands", "[ops]") {
  Tensor a = Tensor::zeros({2, 3}, Dtype::Float64), b = Tensor::zeros({4}, Dtype::Float64);
  REQUIRE_THROWS_WITH(maximum(a, b),
                      Catch::Contains("maximum") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(minimum(b, a),
                      Catch::Contains("minimum") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  REQUIRE_THROWS_WITH(maximum(a, a.to(Dtype::Float32)), Catch::Contains("float64") && Catch::Contains("float32"));
}

TEST_CASE("gradcheck: maximum/minimum with broadcasting", "[ops][gradcheck]") {
  // values drawn from disjoint-enough random sets: no ties within the finite-difference step
  Tensor a = rand_leaf({2, 3}, 21), b = rand_leaf({3}, 22), c = rand_leaf({2, 1}, 23), d = rand_leaf({1, 3}, 24);
  require_gradcheck([](const std::vector<Tensor>& v) { return maximum(v[0], v[1]); }, {a, b});
  require_gradcheck([](const std::vector<Tensor>& v) { return minimum(v[0], v[1]); }, {a, b});
  require_gradcheck([](const std::vector<Tensor>& v) { return maximum(v[0], v[1]); }, {c, d});
  require_gradcheck([](const std::vector<Tensor>& v) { return minimum(v[1], v[0]); }, {c, d});
}

TEST_CASE("max/min/argmax/argmin over every axis match torch (ties to the first)", "[ops]") {
  Tensor x = x234();
  // torch.max(x, 0) / torch.min(x, 0)
  require_close(max(x, 0), {9.0, 7.0, 9.0, 3.0, 5.0, 9.0, 8.0, 6.0, 6.0, 3.0, 6.0, 8.0});
  REQUIRE(ints(argmax(x, 0)) == std::vector<double>{1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0});
  require_close(min(x, 0), {3.0, 1.0, 4.0, 1.0, 2.0, 3.0, 2.0, 4.0, 5.0, 2.0, 5.0, 4.0});
  REQUIRE(ints(argmin(x, 0)) == std::vector<double>{0, 0, 0, 0, 1, 1, 0, 1, 0, 1, 0, 1});
  // torch.max(x, 1) / torch.min(x, 1)
  require_close(max(x, 1), {5.0, 9.0, 5.0, 8.0, 9.0, 7.0, 9.0, 4.0});
  REQUIRE(ints(argmax(x, 1)) == std::vector<double>{1, 1, 2, 2, 0, 0, 0, 1});
  require_close(min(x, 1), {3.0, 1.0, 2.0, 1.0, 2.0, 2.0, 6.0, 3.0});
  REQUIRE(ints(argmin(x, 1)) == std::vector<double>{0, 0, 1, 0, 1, 2, 2, 0});
  // torch.max(x, -1) / torch.min(x, -1): row [9,7,9,3] has its max at 0 (first tie),
  // row [3,1,4,1] its min at 1
  require_close(max(x, -1), {4.0, 9.0, 8.0, 9.0, 8.0, 6.0});
  REQUIRE(ints(argmax(x, 2)) == std::vector<double>{2, 1, 3, 0, 2, 0});
  require_close(min(x, 2), {1.0, 2.0, 3.0, 3.0, 2.0, 2.0});
  REQUIRE(ints(argmin(x, -1)) == std::vector<double>{1, 2, 1, 3, 0, 1});
  // shapes with and without keepdim
  REQUIRE(max(x, 1).shape() == Shape{2, 4});
  REQUIRE(max(x, 1, true).shape() == Shape{2, 1, 4});
  REQUIRE(argmin(x, -1, true).shape() == Shape{2, 3, 1});
  // torch.argmax(x) = 5, torch.argmin(x) = 1 (flattened, first occurrence)
  REQUIRE(argmax(x).item() == 5);
  REQUIRE(argmin(x).item() == 1);
  REQUIRE(argmax(x).shape() == Shape{});
  // int64 input: argmax works, the index of the first maximum
  REQUIRE(ints(argmax(Tensor::from_int64({2, 7, 7, 1}, {2, 2}), 1)) == std::vector<double>{1, 0});
  // NaN wins, like torch.max(tensor([1., nan, 3.]), 0) -> (nan, 1)
  Tensor n = Tensor::from_vector({1, NAN, 3}, {3}, Dtype::Float64);
  REQUIRE(std::isnan(max(n, 0).item()));
  REQUIRE(argmax(n, 0).item() == 1);
  REQUIRE(argmin(n, 0).item() == 1);
}

TEST_CASE("max/min gradient goes to the arg position only", "[ops]") {
  {
    // v, _ = torch.max(x, 1); v.backward(arange(1, 9).reshape(2, 4))
    Tensor x = x234();
    x.requires_grad_();
    Tensor v = max(x, 1);
    v.backward(Tensor::from_vector(seq(8, 1), {2, 4}, Dtype::Float64));
    require_close(x.grad(), {0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 4.0,
                             5.0, 6.0, 7.0, 0.0, 0.0, 0.0, 0.0, 8.0, 0.0, 0.0, 0.0, 0.0});
  }
  {
    // v, _ = torch.min(x, 2, keepdim=True); v.backward(arange(1, 7).reshape(2, 3, 1))
    Tensor x = x234();
    x.requires_grad_();
    Tensor v = min(x, 2, true);
    v.backward(Tensor::from_vector(seq(6, 1), {2, 3, 1}, Dtype::Float64));
    require_close(x.grad(), {0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0,
                             0.0, 0.0, 0.0, 4.0, 5.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0});
  }
}

TEST_CASE("gradcheck: max/min over each axis, keepdim on and off", "[ops][gradcheck]") {
  Tensor x = rand_leaf({2, 3, 4}, 31);
  for (std::int64_t d : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      INFO("dim " << d << " keepdim " << keep);
      require_gradcheck([d, keep](const std::vector<Tensor>& v) { return max(v[0], d, keep); }, {x});
      require_gradcheck([d, keep](const std::vector<Tensor>& v) { return min(v[0], d, keep); }, {x});
    }
}

TEST_CASE("arg-reduction errors: axis out of range, empty axis", "[ops]") {
  Tensor x = x234();
  REQUIRE_THROWS_WITH(max(x, 3), Catch::Contains("max") && Catch::Contains("axis 3") && Catch::Contains("rank 3"));
  REQUIRE_THROWS_AS(argmin(x, -4), std::out_of_range);
  REQUIRE_THROWS_WITH(argmax(Tensor::zeros({2, 0}), 1), Catch::Contains("size 0") && Catch::Contains("[2, 0]"));
}
