// Zero-size dimensions, as PyTorch handles them: every op, reduction, norm, layer and
// loss gets inputs with a 0 in each position and must give PyTorch's shape and values
// (checked against PyTorch 1.13/2.x semantics), with a backward that gives a gradient of
// the input's shape. Under the sanitizers any out-of-bounds read fails these tests.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/group_norm.h>
#include <tapegrad/layers/functional/instance_norm.h>
#include <tapegrad/layers/functional/layer_norm.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/local_response_norm.h>
#include <tapegrad/layers/losses.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {
Tensor leaf(const Shape& s) {
  Tensor t = Tensor::full(s, 0.5, Dtype::Float64);
  t.requires_grad_();
  return t;
}

// f(x) has shape `want`; sum(f(x)).backward() gives x a gradient of x's shape (all 0 when
// the output is empty).
void check_op(const char* what, const Shape& in, const Shape& want, const std::function<Tensor(const Tensor&)>& f) {
  INFO(what << " on " << shape_str(in));
  Tensor x = leaf(in);
  Tensor y = f(x);
  REQUIRE(y.shape() == want);
  Tensor s = sum(y);
  if (numel_of(want) == 0) CHECK(s.item() == 0.0);
  s.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().shape() == in);
}
}  // namespace

TEST_CASE("zero-size: Linear(0, 3) gives the bias for every row; nothing is read out of bounds",
          "[errors][reliability]") {
  Generator gen(1);
  layers::Linear lin(0, 3, true, Dtype::Float64, gen);
  const auto b = lin.bias.to_vector();
  Tensor y = lin.forward(Tensor::zeros({2, 0}, Dtype::Float64));
  REQUIRE(y.shape() == Shape{2, 3});
  CHECK(y.to_vector() == std::vector<double>{b[0], b[1], b[2], b[0], b[1], b[2]});
  Tensor y3 = lin.forward(Tensor::zeros({4, 8, 0}, Dtype::Float64));
  REQUIRE(y3.shape() == Shape{4, 8, 3});
  for (std::int64_t i = 0; i < y3.numel(); ++i) CHECK(y3.at(i) == b[static_cast<std::size_t>(i % 3)]);
  sum(y3).backward();
  CHECK(lin.bias.grad().to_vector() == std::vector<double>{32, 32, 32});
  CHECK(lin.weight.grad().shape() == Shape{3, 0});
  // zero rows, zero outputs
  check_op("linear N=0", {0, 4}, {0, 2}, [](const Tensor& x) { return linear(x, leaf({2, 4}), leaf({2})); });
  check_op("linear out=0", {3, 4}, {3, 0}, [](const Tensor& x) { return linear(x, leaf({0, 4}), leaf({0})); });
  check_op("linear [2,0,4]", {2, 0, 4}, {2, 0, 5}, [](const Tensor& x) { return linear(x, leaf({5, 4})); });
  check_op("matmul K=0", {2, 0}, {2, 3}, [](const Tensor& x) { return matmul(x, leaf({0, 3})); });
  CHECK(matmul(Tensor::ones({2, 0}, Dtype::Float64), Tensor::ones({0, 3}, Dtype::Float64)).to_vector() ==
        std::vector<double>(6, 0.0));
}

TEST_CASE("zero-size: element-wise, shape and index ops", "[errors][reliability]") {
  for (const Shape& s : {Shape{0}, Shape{0, 3}, Shape{3, 0}, Shape{2, 0, 4}, Shape{2, 3, 0}}) {
    check_op("add", s, s, [](const Tensor& x) { return add(x, x); });
    check_op("mul scalar", s, s, [](const Tensor& x) { return mul(x, 2.0); });
    check_op("relu", s, s, [](const Tensor& x) { return relu(x); });
    check_op("sigmoid", s, s, [](const Tensor& x) { return sigmoid(x); });
    check_op("tanh", s, s, [](const Tensor& x) { return tanh(x); });
    check_op("gelu", s, s, [](const Tensor& x) { return gelu(x); });
    check_op("exp", s, s, [](const Tensor& x) { return exp(x); });
    check_op("clamp", s, s, [](const Tensor& x) { return clamp(x, 0.0, 1.0); });
    check_op("pow", s, s, [](const Tensor& x) { return pow(x, 3.0); });
    check_op("maximum", s, s, [](const Tensor& x) { return maximum(x, x); });
    check_op("where", s, s, [](const Tensor& x) { return where(Tensor::ones(x.shape(), Dtype::Int64), x, x); });
    check_op("reshape", s, {numel_of(s)}, [](const Tensor& x) { return reshape(x, {-1}); });
    check_op("flatten", s, {numel_of(s)}, [](const Tensor& x) { return flatten(x); });
    check_op("unsqueeze", s, [&] { Shape t = s; t.insert(t.begin(), 1); return t; }(),
             [](const Tensor& x) { return unsqueeze(x, 0); });
    check_op("cat", s, [&] { Shape t = s; t[0] *= 2; return t; }(), [](const Tensor& x) { return cat({x, x}, 0); });
    check_op("stack", s, [&] { Shape t = s; t.insert(t.begin(), 2); return t; }(),
             [](const Tensor& x) { return stack({x, x}, 0); });
    if (s.size() >= 2) {
      check_op("transpose", s, [&] { Shape t = s; std::swap(t[0], t[1]); return t; }(),
               [](const Tensor& x) { return transpose(x, 0, 1); });
      check_op("narrow", s, [&] { Shape t = s; t[1] = 0; return t; }(),
               [](const Tensor& x) { return narrow(x, 1, 0, 0); });
      check_op("slice step 2", s, [&] { Shape t = s; t[1] = (t[1] + 1) / 2; return t; }(),
               [](const Tensor& x) { return slice(x, 1, 0, std::nullopt, 2); });
    }
  }
  // broadcasting a [3, 1] against [3, 0] gives [3, 0]; [1] against [0] gives [0]
  check_op("broadcast add", {3, 1}, {3, 0}, [](const Tensor& x) { return add(x, leaf({3, 0})); });
  CHECK(add(Tensor::ones({1}), Tensor::ones({0})).shape() == Shape{0});
}

TEST_CASE("zero-size: reductions (sum 0; mean over nothing refused, not PyTorch's silent NaN; max refuses)",
          "[errors][reliability]") {
  const Tensor e = Tensor::ones({2, 0}, Dtype::Float64);
  CHECK(sum(e).item() == 0.0);
  CHECK_THAT(thrown<std::invalid_argument>([&] { mean(e); }), Contains("zero elements") && Contains("[2, 0]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { mean(e, {1}); }), Contains("zero elements"));
  CHECK(sum(e, {1}).to_vector() == std::vector<double>{0, 0});
  CHECK(sum(e, {0}).shape() == Shape{0});
  CHECK(mean(e, {0}).shape() == Shape{0});
  check_op("sum dim 1", {2, 0}, {2}, [](const Tensor& x) { return sum(x, {1}); });
  check_op("sum dim 0", {2, 0}, {0}, [](const Tensor& x) { return sum(x, {0}); });
  check_op("mean dim 0", {2, 0}, {0}, [](const Tensor& x) { return mean(x, {0}); });
  check_op("max over the non-empty dim", {2, 0}, {0}, [](const Tensor& x) { return max(x, 0); });
  check_op("softmax over the empty dim", {2, 0}, {2, 0}, [](const Tensor& x) { return softmax(x, 1); });
  check_op("log_softmax", {0, 3}, {0, 3}, [](const Tensor& x) { return log_softmax(x, 1); });
  // logsumexp over nothing is log(0) = -inf
  const auto lse = logsumexp(e, 1).to_vector();
  CHECK((lse.size() == 2 && std::isinf(lse[0]) && lse[0] < 0));
  // no identity for max/argmax over an empty dimension (PyTorch: IndexError)
  CHECK_THAT(thrown<std::invalid_argument>([&] { max(e, 1); }), Contains("max") && Contains("[2, 0]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { argmax(e, 1); }), Contains("argmax") && Contains("[2, 0]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { argmax(e); }), Contains("argmax") && Contains("size 0"));
}

TEST_CASE("zero-size: norms on empty batches and empty spatial sizes", "[errors][reliability]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  // BatchNorm in training refuses an empty batch (docs/errors.md: no statistics exist;
  // PyTorch counts it silently) and changes nothing; in eval mode it gives an empty output
  // and a backward with zero gradients for weight and bias, as PyTorch.
  for (const Shape& s : {Shape{0, 3}, Shape{0, 3, 4}, Shape{2, 3, 0}}) {
    INFO(shape_str(s));
    layers::BatchNorm1d bn(3, {.dtype = Dtype::Float64});
    Tensor x = leaf(s);
    CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("more than 1 value per channel"));
    CHECK(bn.batches_tracked() == 0);
    bn.eval();
    Tensor y = bn.forward(x);
    CHECK(y.shape() == s);
    sum(y).backward();
    CHECK(x.grad().shape() == s);
    CHECK(bn.weight.grad().to_vector() == std::vector<double>{0, 0, 0});
    CHECK(bn.running_mean.to_vector() == std::vector<double>{0, 0, 0});
    CHECK(bn.running_var.to_vector() == std::vector<double>{1, 1, 1});
  }
  layers::BatchNorm2d bn2(2, {.dtype = Dtype::Float64});
  bn2.eval();
  CHECK(bn2.forward(leaf({0, 2, 3, 3})).shape() == Shape{0, 2, 3, 3});
  CHECK(bn2.forward(leaf({4, 2, 0, 3})).shape() == Shape{4, 2, 0, 3});
  check_op("layer_norm N=0", {0, 4}, {0, 4},
           [](const Tensor& x) { return layers::functional::layer_norm(x, {4}, leaf({4}), leaf({4})); });
  check_op("layer_norm [2,0,4]", {2, 0, 4}, {2, 0, 4},
           [](const Tensor& x) { return layers::functional::layer_norm(x, {4}); });
  check_op("group_norm N=0", {0, 4, 3}, {0, 4, 3},
           [](const Tensor& x) { return layers::functional::group_norm(x, 2, leaf({4}), leaf({4})); });
  check_op("group_norm L=0", {2, 4, 0}, {2, 4, 0},
           [](const Tensor& x) { return layers::functional::group_norm(x, 2, leaf({4}), leaf({4})); });
  layers::InstanceNorm1d in1(3, {.dtype = Dtype::Float64});
  CHECK(in1.forward(leaf({0, 3, 5})).shape() == Shape{0, 3, 5});
  layers::LocalResponseNorm lrn(2);
  CHECK(lrn.forward(Tensor::ones({0, 3, 4})).shape() == Shape{0, 3, 4});
  CHECK(lrn.forward(Tensor::ones({2, 3, 0})).shape() == Shape{2, 3, 0});
}

TEST_CASE("zero-size: losses on an empty batch (sum 0 and None empty as PyTorch; mean refused, not NaN)",
          "[errors][reliability]") {
  using layers::Reduction;
  const Tensor in = leaf({0, 3}), t = Tensor::zeros({0, 3}, Dtype::Float64);
  CHECK_THAT(thrown<std::invalid_argument>([&] { layers::mse_loss(in, t); }), Contains("empty"));
  CHECK(layers::mse_loss(in, t, Reduction::Sum).item() == 0.0);
  CHECK(layers::mse_loss(in, t, Reduction::None).shape() == Shape{0, 3});
  const Tensor idx = Tensor::from_int64({}, {0});
  CHECK_THAT(thrown<std::invalid_argument>([&] { layers::cross_entropy(in, idx); }), Contains("zero samples"));
  CHECK(layers::cross_entropy(in, idx, Reduction::Sum).item() == 0.0);
  CHECK(layers::cross_entropy(in, idx, Reduction::None).shape() == Shape{0});
  CHECK(layers::nll_loss(in, idx, Reduction::Sum).item() == 0.0);
  CHECK(layers::binary_cross_entropy_with_logits(in, t, Reduction::Sum).item() == 0.0);
  CHECK(layers::binary_cross_entropy_with_logits(in, t, Reduction::None).shape() == Shape{0, 3});
  const Tensor in3 = leaf({2, 0}), t3 = Tensor::zeros({2, 0}, Dtype::Float64);
  CHECK(layers::mse_loss(in3, t3, Reduction::Sum).item() == 0.0);
  Tensor s = layers::cross_entropy(in, idx, Reduction::Sum);
  s.backward();
  CHECK(in.grad().shape() == Shape{0, 3});
}
