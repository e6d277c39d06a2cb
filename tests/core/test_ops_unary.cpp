// exp, log, sqrt, rsqrt, abs, clamp: values and gradients against PyTorch 1.13, gradcheck.
#include "test_ops_support.h"

using namespace ops_test;

namespace {
const std::vector<double> kX = {-2.5, -1.0, -0.3, 0.0, 0.4, 1.7, 3.0};
const std::vector<double> kP = {0.25, 0.5, 1.0, 2.0, 9.0};

// d(sum(f(x)))/dx
Tensor grad_of(Tensor (*f)(const Tensor&), const std::vector<double>& v) {
  Tensor x = leaf(v, {static_cast<std::int64_t>(v.size())});
  sum(f(x)).backward();
  return x.grad();
}
}  // namespace

TEST_CASE("exp/log/sqrt/rsqrt/abs values and gradients match torch", "[ops]") {
  const Shape sx{7}, sp{5};
  // torch.exp(x), x = tensor([-2.5,-1,-0.3,0,0.4,1.7,3], dtype=float64); its grad is the same
  const std::vector<double> e = {0.0820849986238988, 0.36787944117144233, 0.7408182206817179, 1.0,
                                 1.4918246976412703, 5.473947391727199,   20.085536923187668};
  require_close(exp(Tensor::from_vector(kX, sx, Dtype::Float64)), e);
  require_close(grad_of(exp, kX), e);
  // torch.log(p), p = tensor([0.25,0.5,1,2,9]); grad: 1/p
  require_close(log(Tensor::from_vector(kP, sp, Dtype::Float64)),
                {-1.3862943611198906, -0.6931471805599453, 0.0, 0.6931471805599453, 2.1972245773362196});
  require_close(grad_of(log, kP), {4.0, 2.0, 1.0, 0.5, 0.1111111111111111});
  // torch.sqrt(p) and its grad
  require_close(sqrt(Tensor::from_vector(kP, sp, Dtype::Float64)), {0.5, 0.7071067811865476, 1.0, 1.4142135623730951, 3.0});
  require_close(grad_of(sqrt, kP), {1.0, 0.7071067811865475, 0.5, 0.35355339059327373, 0.16666666666666666});
  // torch.rsqrt(p) and its grad
  require_close(rsqrt(Tensor::from_vector(kP, sp, Dtype::Float64)), {2.0, 1.414213562373095, 1.0, 0.7071067811865475,
                                                     0.3333333333333333});
  require_close(grad_of(rsqrt, kP),
                {-4.0, -1.4142135623730947, -0.5, -0.17677669529663684, -0.018518518518518517});
  // torch.abs(x); its grad is sign(x) with sign(0) = 0
  require_close(abs(Tensor::from_vector(kX, sx, Dtype::Float64)), {2.5, 1.0, 0.3, 0.0, 0.4, 1.7, 3.0});
  require_close(grad_of(abs, kX), {-1, -1, -1, 0, 1, 1, 1});
}

TEST_CASE("unary edge values follow torch: log(0) = -inf, sqrt(-1) = NaN, float32 path", "[ops]") {
  Tensor z = Tensor::from_vector({0.0, -1.0}, {2}, Dtype::Float64);
  auto l = log(z).to_vector();
  REQUIRE(std::isinf(l[0]));
  REQUIRE(l[0] < 0);
  REQUIRE(std::isnan(l[1]));
  REQUIRE(std::isnan(sqrt(z).at(1)));
  Tensor f = Tensor::from_vector(kP, {5}, Dtype::Float32);
  Tensor y = sqrt(f);
  REQUIRE(y.dtype() == Dtype::Float32);
  require_close(y, {0.5, 0.7071067811865476, 1.0, 1.4142135623730951, 3.0}, 1e-7);
  REQUIRE_THROWS_WITH(exp(Tensor::from_int64({1, 2}, {2})), Catch::Contains("exp") && Catch::Contains("int64"));
}

TEST_CASE("clamp: values, inclusive-bound gradient, one-sided, min > max, NaN", "[ops]") {
  // torch.clamp(x, -1.0, 1.7) and its grad (bounds inclusive: x = 1.7 passes, x = -1 passes)
  Tensor x = leaf(kX, {7});
  Tensor y = clamp(x, -1.0, 1.7);
  require_close(y, {-1.0, -1.0, -0.3, 0.0, 0.4, 1.7, 1.7});
  sum(y).backward();
  require_close(x.grad(), {0, 1, 1, 1, 1, 1, 0});
  // torch.clamp(x, min=0.0): the x = 0 entry keeps its gradient
  Tensor x2 = leaf(kX, {7});
  Tensor y2 = clamp_min(x2, 0.0);
  require_close(y2, {0.0, 0.0, 0.0, 0.0, 0.4, 1.7, 3.0});
  sum(y2).backward();
  require_close(x2.grad(), {0, 0, 0, 1, 1, 1, 1});
  require_close(clamp_max(Tensor::from_vector(kX, {7}, Dtype::Float64), 0.0), {-2.5, -1.0, -0.3, 0.0, 0.0, 0.0, 0.0});
  // torch.clamp(x, 1.0, 0.0) is 0 everywhere with zero gradient
  Tensor x3 = leaf(kX, {7});
  Tensor y3 = clamp(x3, 1.0, 0.0);
  require_close(y3, {0, 0, 0, 0, 0, 0, 0});
  sum(y3).backward();
  require_close(x3.grad(), {0, 0, 0, 0, 0, 0, 0});
  REQUIRE(std::isnan(clamp(Tensor::from_vector({NAN}, {1}, Dtype::Float64), 0.0, 1.0).item()));
  REQUIRE_THROWS_WITH(clamp(x, std::nullopt, std::nullopt), Catch::Contains("at least one"));
}

TEST_CASE("gradcheck: exp, log, sqrt, rsqrt, abs, clamp (float64)", "[ops][gradcheck]") {
  Tensor a = rand_leaf({3, 4}, 11, -2.0, 2.0);
  Tensor p = rand_leaf({3, 4}, 12, 0.2, 3.0);
  require_gradcheck([](const std::vector<Tensor>& v) { return exp(v[0]); }, {a});
  require_gradcheck([](const std::vector<Tensor>& v) { return log(v[0]); }, {p});
  require_gradcheck([](const std::vector<Tensor>& v) { return sqrt(v[0]); }, {p});
  require_gradcheck([](const std::vector<Tensor>& v) { return rsqrt(v[0]); }, {p});
  // away from the kink at 0 (|a| >= 0.1 by construction below)
  Tensor b = leaf({-1.5, -0.7, -0.1, 0.2, 0.9, 1.8}, {2, 3});
  require_gradcheck([](const std::vector<Tensor>& v) { return abs(v[0]); }, {b});
  require_gradcheck([](const std::vector<Tensor>& v) { return clamp(v[0], -0.5, 0.5); }, {b});
  // composed: log(sqrt(exp(a)) + 1)
  require_gradcheck([](const std::vector<Tensor>& v) { return log(sqrt(exp(v[0])) + 1.0); }, {a});
}
