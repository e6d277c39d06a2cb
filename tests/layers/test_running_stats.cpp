// The batch-norm family's running-statistics step (functional::RunningStats, layers/functional/running_stats.h): the
// unbiased/biased running variance, the one-value-per-channel errors in both modes, and
// BatchRenorm sharing the step (worked examples, float64).
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_renorm.h>

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Matchers::Contains;

namespace {
BatchNormOptions f64_options() {
  BatchNormOptions o;
  o.dtype = Dtype::Float64;
  return o;
}
// Column values 1, 3, 5, 7: mean 4, biased variance 5, unbiased 20/3 (as case C01).
Tensor four_rows() { return Tensor::from_vector({1, 0, 3, 0, 5, 0, 7, 0}, {4, 2}, Dtype::Float64); }
}  // namespace

TEST_CASE("BatchNorm running_var: unbiased by default, biased with unbiased_running_var = false", "[batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  BatchNorm1d unbiased(2, f64_options());
  unbiased(four_rows());
  CHECK(unbiased.running_mean.to_vector()[0] == Approx(0.4).epsilon(1e-14));
  CHECK(unbiased.running_var.to_vector()[0] == Approx(0.9 + 0.1 * 20.0 / 3.0).epsilon(1e-14));
  auto o = f64_options();
  o.unbiased_running_var = false;
  BatchNorm1d biased(2, o);
  const Tensor yb = biased(four_rows());
  CHECK(biased.running_mean.to_vector()[0] == Approx(0.4).epsilon(1e-14));
  CHECK(biased.running_var.to_vector()[0] == Approx(0.9 + 0.1 * 5.0).epsilon(1e-14));  // 1.4
  CHECK(biased.batches_tracked() == 1);
  // the forward normalises with the biased variance either way
  const Tensor yu = unbiased.forward(four_rows());
  CHECK(yb.to_vector() == yu.to_vector());
}

TEST_CASE("BatchNorm without running statistics: one value per channel says eval() does not help", "[batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  auto o = f64_options();
  o.track_running_stats = false;
  BatchNorm1d bn(3, o);
  bn.eval();
  const Tensor one = Tensor::from_vector({0.5, -1, 2}, {1, 3}, Dtype::Float64);
  CHECK_THROWS_WITH(bn(one), Contains("no running statistics") && Contains("track_running_stats=false") &&
                                 Contains("[1, 3]") && !Contains("call eval()"));
  bn.train();
  CHECK_THROWS_WITH(bn(one), Contains("no running statistics"));
  BatchNorm1d tracked(3, f64_options());
  CHECK_THROWS_WITH(tracked(one), Contains("when training") && Contains("call eval()"));
  CHECK(tracked.batches_tracked() == 0);
  tracked.eval();
  CHECK(tracked(one).to_vector()[0] == Approx(0.5 / std::sqrt(1 + 1e-5)).epsilon(1e-14));
}

TEST_CASE("BatchRenorm shares BatchNorm's running-statistics step", "[batchnorm]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  auto o = f64_options();
  o.momentum = std::nullopt;  // cumulative average: factor 1/num_batches_tracked
  o.unbiased_running_var = false;
  BatchRenorm1d brn(2, o, 1.0, 0.0);  // rmax 1, dmax 0: BatchNorm exactly
  const Tensor one = Tensor::from_vector({0.5, -1}, {1, 2}, Dtype::Float64);
  CHECK_THROWS_WITH(brn(one), Contains("BatchRenorm1d") && Contains("more than 1 value per channel"));
  CHECK(brn.batches_tracked() == 0);
  brn(four_rows());
  CHECK(brn.batches_tracked() == 1);
  CHECK(brn.running_mean.to_vector()[0] == Approx(4.0).epsilon(1e-14));  // factor 1: the batch mean
  CHECK(brn.running_var.to_vector()[0] == Approx(5.0).epsilon(1e-14));   // biased, as asked
  BatchNorm1d bn(2, o);
  CHECK(brn.forward(four_rows()).to_vector() == bn(four_rows()).to_vector());
}
