// Anomaly mode (core/autograd.h, like torch.autograd.detect_anomaly): a backward that
// produces NaN or Inf throws, naming the op and where it was recorded (the module path).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {

// Row-wise Euclidean norm written as (Σ x²)^½: finite forward, but at a zero row the
// backward of pow is ½·0^(-½) = Inf. (PyTorch's x.pow(2).sum(1).pow(0.5) has the same
// bug; torch.linalg.norm special-cases zero.)
class L2Norm : public Module {
 public:
  Tensor forward(const Tensor& x) override { return pow(sum(square(x), {1}), 0.5); }
  std::string type_name() const override { return "L2Norm"; }
};

Tensor rows_with_a_zero_row() {
  Tensor x = Tensor::from_vector({0, 0, 3, 4}, {2, 2}, Dtype::Float64);
  x.requires_grad_();
  return x;
}

}  // namespace

TEST_CASE("anomaly: without anomaly mode a NaN gradient passes silently", "[anomaly]") {
  // PyTorch: x = [[0, 0], [3, 4]]; (x**2).sum(1)**0.5 summed, backward ->
  // x.grad = [[nan, nan], [0.6, 0.8]].
  Tensor x = rows_with_a_zero_row();
  L2Norm norm;
  sum(norm(x)).backward();
  const std::vector<double> g = x.grad().to_vector();
  CHECK(std::isnan(g[0]));
  CHECK(std::isnan(g[1]));
  CHECK(g[2] == Approx(0.6));
  CHECK(g[3] == Approx(0.8));
}

TEST_CASE("anomaly: the error names the op, the input and the module path where it was recorded", "[anomaly]") {
  Generator gen(1);
  auto net = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Linear>(2, 2, false, Dtype::Float64, gen), std::make_shared<L2Norm>()});
  // A zero input row stays zero through a bias-free Linear, so the norm's backward is Inf.
  Tensor x = Tensor::from_vector({0, 0, 1, 2}, {2, 2}, Dtype::Float64);
  AnomalyModeGuard anomaly;
  Tensor loss = sum((*net)(x));
  REQUIRE(std::isfinite(loss.item()));  // the forward is finite: only the backward is not
  const std::string msg = thrown<std::runtime_error>([&] { loss.backward(); });
  CHECK_THAT(msg, Contains("anomaly") && Contains("backward of 'pow'") && Contains("non-finite"));
  CHECK_THAT(msg, Contains("input 0 ([2] float64)"));
  // The site: Sequential -> child "1" -> L2Norm, then the op.
  CHECK_THAT(msg, Contains("recorded at: Sequential/1/L2Norm: pow"));
  // The Linear's weight got no gradient: the backward stopped at the first bad op.
  CHECK_FALSE(net->named_parameters()[0].second.grad().defined());
}

TEST_CASE("anomaly: an op outside every module is reported as top level", "[anomaly]") {
  Tensor x = rows_with_a_zero_row();
  AnomalyModeGuard anomaly;
  Tensor loss = sum(pow(sum(square(x), {1}), 0.5));
  CHECK_THAT(thrown<std::runtime_error>([&] { loss.backward(); }),
             Contains("backward of 'pow'") && Contains("recorded at: top level (outside any module): pow"));
}

TEST_CASE("anomaly: Inf gradients are caught too, and a finite backward is unaffected", "[anomaly]") {
  AnomalyModeGuard anomaly;
  // d(a/b)/db = -a/b² is -Inf at b = 0 for a = 1 (the forward is Inf as well; as in
  // PyTorch, anomaly mode checks gradients only).
  Tensor a = Tensor::from_vector({1.0}, {1}, Dtype::Float64);
  Tensor b = Tensor::from_vector({0.0}, {1}, Dtype::Float64);
  b.requires_grad_();
  Tensor q = sum(div(a, b));
  CHECK_THAT(thrown<std::runtime_error>([&] { q.backward(); }), Contains("backward of 'div'"));
  // A finite graph in anomaly mode gives the same gradient as without: d(Σ 3x²)/dx = 6x.
  Tensor x = Tensor::from_vector({1, -2}, {2}, Dtype::Float64);
  x.requires_grad_();
  sum(mul(square(x), 3.0)).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{6, -12});
}

TEST_CASE("anomaly: the guard restores the previous mode", "[anomaly]") {
  REQUIRE_FALSE(anomaly_mode_enabled());
  {
    AnomalyModeGuard on;
    CHECK(anomaly_mode_enabled());
    {
      AnomalyModeGuard off(false);
      CHECK_FALSE(anomaly_mode_enabled());
    }
    CHECK(anomaly_mode_enabled());
  }
  CHECK_FALSE(anomaly_mode_enabled());
}
