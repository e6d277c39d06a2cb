// Activation ops and modules: values and gradients against PyTorch, gradcheck, shapes.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/identity.h>
#include "test_ops_support.h"
#include "test_support.h"

using namespace tapegrad;
using ops_test::leaf;
using ops_test::require_gradcheck;
using tapegrad::test::require_close;

namespace {
// x and grad_output of the PyTorch reference below
const std::vector<double> kX{-3.0, -0.5, 0.0, 0.7, 2.5};
const std::vector<double> kG{1.0, -2.0, 0.5, 3.0, -1.0};

void check_against_torch(Tensor (*op)(const Tensor&), const std::vector<double>& y, const std::vector<double>& gx) {
  Tensor x = leaf(kX, {5});
  Tensor out = op(x);
  require_close(out.to_vector(), y);
  out.backward(Tensor::from_vector(kG, {5}, Dtype::Float64));
  require_close(x.grad().to_vector(), gx);
  // float32 agrees to float32 precision
  Tensor x32 = Tensor::from_vector(kX, {5}, Dtype::Float32);
  require_close(op(x32).to_vector(), y, 1e-6);
}
}  // namespace

// Reference: x = torch.tensor([-3, -0.5, 0, 0.7, 2.5], dtype=float64); y = f(x);
// y.backward(torch.tensor([1, -2, 0.5, 3, -1])); values are y and x.grad (PyTorch 1.13).
TEST_CASE("sigmoid matches torch.sigmoid, values and gradient", "[activation]") {
  check_against_torch(sigmoid, {0.04742587317756678, 0.3775406687981454, 0.5, 0.6681877721681662, 0.9241418199787566},
                      {0.04517665973091214, -0.470007424403189, 0.125, 0.6651386198793271, -0.07010371654510807});
  // no overflow at the extremes
  Tensor big = Tensor::from_vector({-1000.0, 1000.0}, {2}, Dtype::Float64);
  REQUIRE(sigmoid(big).to_vector() == std::vector<double>{0.0, 1.0});
}

TEST_CASE("tanh matches torch.tanh, values and gradient", "[activation]") {
  check_against_torch(tapegrad::tanh,
                      {-0.9950547536867305, -0.46211715726000974, 0.0, 0.6043677771171635, 0.9866142981514303},
                      {0.009866037165440166, -1.5728954659318548, 0.5, 1.9042187699473758, -0.02659222668316057});
}

TEST_CASE("leaky_relu matches F.leaky_relu(x, 0.1), slope at 0", "[activation]") {
  Tensor x = leaf(kX, {5});
  Tensor y = leaky_relu(x, 0.1);
  require_close(y.to_vector(), {-0.30000000000000004, -0.05, 0.0, 0.7, 2.5});
  y.backward(Tensor::from_vector(kG, {5}, Dtype::Float64));
  // PyTorch's derivative at 0 is the slope: 0.5 * 0.1 = 0.05
  require_close(x.grad().to_vector(), {0.1, -0.2, 0.05, 3.0, -1.0});
  REQUIRE_THROWS_WITH(leaky_relu(x, std::nan("")), Catch::Contains("negative_slope"));
}

TEST_CASE("gelu (erf form) matches F.gelu, values and gradient", "[activation]") {
  check_against_torch([](const Tensor& t) { return gelu(t); },
                      {-0.00404969409489031, -0.15426876936299344, 0.0, 0.5306254434438489, 2.4844758366855597},
                      {-0.01194564720418392, -0.26500975068767424, 0.25, 2.9298423034009797, -1.037611085908145});
}

TEST_CASE("gelu tanh approximation matches F.gelu(x, approximate='tanh')", "[activation]") {
  Tensor x = leaf(kX, {5});
  Tensor y = gelu(x, true);
  require_close(y.to_vector(),
                {-0.0036373920817729943, -0.15428599017485606, 0.0, 0.5305701347051167, 2.484915733910001});
  y.backward(Tensor::from_vector(kG, {5}, Dtype::Float64));
  require_close(x.grad().to_vector(),
                {-0.011584166630969648, -0.2652601929307153, 0.25, 2.929071655968312, -1.037951576212666});
  layers::GELU m("tanh");
  REQUIRE(m.forward(x.detach()).to_vector() == y.to_vector());
  REQUIRE(m.extra_repr() == "approximate='tanh'");
  REQUIRE_THROWS_WITH(layers::GELU("fast"), Catch::Contains("fast"));
}

TEST_CASE("gradcheck: sigmoid, tanh, leaky_relu, gelu", "[activation][gradcheck]") {
  Generator g(7);
  Tensor x = uniform({3, 4}, -3.0, 3.0, Dtype::Float64, g);
  x.requires_grad_();
  require_gradcheck([](const std::vector<Tensor>& v) { return sigmoid(v[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return tapegrad::tanh(v[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return leaky_relu(v[0], 0.2); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return gelu(v[0]); }, {x});
  require_gradcheck([](const std::vector<Tensor>& v) { return gelu(v[0], true); }, {x});
  // composed: the tape chains them
  require_gradcheck([](const std::vector<Tensor>& v) { return gelu(tapegrad::tanh(sigmoid(v[0]) * 3.0)); }, {x});
}

TEST_CASE("activation ops reject int64 input naming the dtype", "[activation]") {
  Tensor i = Tensor::from_int64({1, 2}, {2});
  REQUIRE_THROWS_WITH(sigmoid(i), Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(gelu(i), Catch::Contains("int64"));
}

TEST_CASE("activation modules: same in train and eval, names", "[activation]") {
  Tensor x = Tensor::from_vector(kX, {5}, Dtype::Float64);
  layers::Sigmoid s;
  layers::Tanh t;
  layers::LeakyReLU l(0.1);
  layers::GELU ge;
  layers::Identity id;
  REQUIRE(s.forward(x).to_vector() == sigmoid(x).to_vector());
  REQUIRE(t.forward(x).to_vector() == tapegrad::tanh(x).to_vector());
  REQUIRE(l.forward(x).to_vector() == leaky_relu(x, 0.1).to_vector());
  REQUIRE(ge.forward(x).to_vector() == gelu(x).to_vector());
  REQUIRE(id.forward(x).shares_storage_with(x));
  s.eval();
  REQUIRE(s.forward(x).to_vector() == sigmoid(x).to_vector());
  REQUIRE(layers::LeakyReLU().negative_slope == 0.01);
  REQUIRE(l.extra_repr() == "negative_slope=0.1");
  REQUIRE(s.type_name() == "Sigmoid");
  REQUIRE(ge.type_name() == "GELU");
}

TEST_CASE("Flatten merges start_dim..end_dim as a view and routes the gradient", "[activation]") {
  Generator g(3);
  Tensor x = uniform({2, 3, 4, 5}, -1, 1, Dtype::Float64, g);
  layers::Flatten f;
  Tensor y = f.forward(x);
  REQUIRE(y.shape() == Shape{2, 60});
  REQUIRE(y.shares_storage_with(x));
  REQUIRE(layers::Flatten(0, -1).forward(x).shape() == Shape{120});
  REQUIRE(layers::Flatten(1, 2).forward(x).shape() == Shape{2, 12, 5});
  REQUIRE(layers::Flatten(-3, -2).forward(x).shape() == Shape{2, 12, 5});
  REQUIRE(layers::Flatten(2, 2).forward(x).shape() == Shape{2, 3, 4, 5});
  REQUIRE_THROWS_WITH(layers::Flatten(1, 4).forward(x), Catch::Contains("end_dim") && Catch::Contains("[2, 3, 4, 5]"));
  REQUIRE_THROWS_WITH(layers::Flatten(3, 1).forward(x), Catch::Contains("start_dim"));
  x.requires_grad_();
  require_gradcheck([&](const std::vector<Tensor>& v) { return layers::Flatten().forward(v[0]) * 2.0; }, {x});
}
