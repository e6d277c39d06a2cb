// InstanceNorm1d/2d: gradcheck in train and eval mode, running statistics rule,
// num_batches_tracked never moves, unbatched inputs, errors.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/functional/instance_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using namespace tapegrad::test;

namespace {
InstanceNormOptions opts(bool affine, bool track, double momentum = 0.1) {
  InstanceNormOptions o;
  o.affine = affine;
  o.track_running_stats = track;
  o.momentum = momentum;
  o.dtype = Dtype::Float64;
  return o;
}
// gradcheck in train and eval mode; buffers are restored before every forward so the
// function stays the same while gradcheck perturbs its inputs.
void gradcheck_instance(InstanceNormBase& m, Tensor x) {
  if (m.running_mean.defined()) {
    m.running_mean.copy_(rand64({m.num_features}, 6));
    m.running_var.copy_(rand64({m.num_features}, 7, 0.5, 2.0));
  }
  gradcheck_module(m, x, 5, keep_running_stats(m));
}
}  // namespace

TEST_CASE("InstanceNorm gradcheck: every affine/track combination, 1d and 2d", "[norms][gradcheck]") {
  tapegrad::ModeChecksPause pause;  // gradcheck runs train-mode forwards without gradients on purpose
  for (bool affine : {false, true})
    for (bool track : {false, true}) {
      INFO("affine " << affine << " track " << track);
      InstanceNorm1d in1(3, opts(affine, track));
      gradcheck_instance(in1, rand64({2, 3, 4}, 40));
      InstanceNorm2d in2(2, opts(affine, track));
      gradcheck_instance(in2, rand64({2, 2, 2, 3}, 41));
    }
  SECTION("a constant instance (zero variance), a batch of two") {
    InstanceNorm1d in(2, opts(true, true));
    gradcheck_instance(in, Tensor::from_vector({1, 1, 1, 0.5, -2, 4, 0.3, 0.2, 0.1, 7, 7, 7}, {2, 2, 3}, Dtype::Float64));
  }
}

TEST_CASE("InstanceNorm running stats: batch average of per-instance mean and unbiased var", "[norms]") {
  InstanceNorm1d in(1, opts(false, true, 0.5));
  // instance 0 = [0, 2]: mean 1, unbiased var 2; instance 1 = [4, 8]: mean 6, unbiased var 8
  Tensor x = Tensor::from_vector({0, 2, 4, 8}, {2, 1, 2}, Dtype::Float64);
  Tensor y = in.forward(x);
  // each instance normalised by its own biased variance (1 and 4)
  const double a = 1 / std::sqrt(1 + 1e-5), b = 2 / std::sqrt(4 + 1e-5);
  require_close(y, Tensor::from_vector({-a, a, -b, b}, {2, 1, 2}, Dtype::Float64));
  // running_mean = 0.5·0 + 0.5·(1 + 6)/2 = 1.75; running_var = 0.5·1 + 0.5·(2 + 8)/2 = 3
  REQUIRE(in.running_mean.to_vector() == std::vector<double>{1.75});
  REQUIRE(in.running_var.to_vector() == std::vector<double>{3.0});
  REQUIRE(in.num_batches_tracked.item() == 0);  // never incremented
  in.forward(x);
  REQUIRE(in.num_batches_tracked.item() == 0);
  REQUIRE(in.running_mean.to_vector() == std::vector<double>{0.5 * 1.75 + 0.5 * 3.5});
  // eval uses the running statistics, per channel
  in.eval();
  const double rm = in.running_mean.item(), rv = in.running_var.item();
  require_close(in.forward(Tensor::from_vector({5, 6}, {1, 1, 2}, Dtype::Float64)),
                Tensor::from_vector({(5 - rm) / std::sqrt(rv + 1e-5), (6 - rm) / std::sqrt(rv + 1e-5)}, {1, 1, 2}, Dtype::Float64));
  REQUIRE(in.state_dict().keys() == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
}

TEST_CASE("InstanceNorm without tracking uses instance stats in eval too, and has no state", "[norms]") {
  InstanceNorm2d in(2, opts(false, false));
  Tensor x = rand64({3, 2, 2, 2}, 50);
  Tensor y = in.forward(x);
  in.eval();
  REQUIRE(in.forward(x).to_vector() == y.to_vector());
  REQUIRE(in.state_dict().keys().empty());
  // a sample's output does not depend on the rest of its batch
  const auto xv = x.to_vector();
  Tensor one = Tensor::from_vector(std::vector<double>(xv.begin(), xv.begin() + 8), {1, 2, 2, 2}, Dtype::Float64);
  auto yv = y.to_vector(), ov = in.forward(one).to_vector();
  for (int i = 0; i < 8; ++i) REQUIRE(yv[i] == ov[i]);
}

TEST_CASE("InstanceNorm accepts unbatched (C, L) and (C, H, W)", "[norms]") {
  InstanceNorm1d in(3, opts(true, false));
  Tensor x = rand64({3, 5}, 51);
  Tensor y = in.forward(x);
  REQUIRE(y.shape() == Shape{3, 5});
  require_close(y, reshape(in.forward(reshape(x, {1, 3, 5})), {3, 5}), 0);
  InstanceNorm2d in2(2, opts(false, false));
  REQUIRE(in2.forward(rand64({2, 3, 3}, 52)).shape() == Shape{2, 3, 3});
}

TEST_CASE("InstanceNorm errors name shapes; one position per instance is refused in training", "[norms]") {
  InstanceNorm1d in(3, opts(false, true));
  REQUIRE_THROWS_WITH(in.forward(Tensor::zeros({2, 4, 5}, Dtype::Float64)),
                      Catch::Contains("3 channels") && Catch::Contains("[2, 4, 5]"));
  REQUIRE_THROWS_WITH(in.forward(Tensor::zeros({2, 3, 4, 5}, Dtype::Float64)), Catch::Contains("[2, 3, 4, 5]"));
  REQUIRE_THROWS_WITH(in.forward(Tensor::zeros({2, 3, 1}, Dtype::Float64)),
                      Catch::Contains("spatial") && Catch::Contains("[2, 3, 1]"));
  REQUIRE(in.running_mean.to_vector() == std::vector<double>{0, 0, 0});  // untouched
  in.eval();  // running statistics: a single position is fine
  REQUIRE(in.forward(Tensor::ones({2, 3, 1}, Dtype::Float64)).shape() == Shape{2, 3, 1});
  InstanceNormOptions bad;
  bad.momentum = 1.5;
  REQUIRE_THROWS_WITH(InstanceNorm1d(3, bad), Catch::Contains("momentum"));
  REQUIRE_THROWS_WITH(functional::instance_norm(Tensor::zeros({2, 3, 4}), Tensor(), Tensor(), Tensor(), Tensor(), false),
                      Catch::Contains("running_mean"));
}
