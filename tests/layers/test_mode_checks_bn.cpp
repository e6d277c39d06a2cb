// The mode checks of the batch norms and of a non-strict load (core/mode_checks.h):
// bn_train_no_grad (plain, fused BatchNorm1dReLU, 2d, BatchRenorm, tracked InstanceNorm),
// never_updated_stats (once per layer), bn_buffers_not_loaded; each warns once with its text,
// counts later occurrences, throws in Throw mode with nothing changed, is silent when paused.
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/warnings.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include "test_support.h"
#include "mode_checks_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;

namespace {

using Capture = ModeChecksCapture;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Tensor batch(std::int64_t n, std::int64_t c, std::uint64_t seed) {
  return test::rand64({n, c}, seed).to(Dtype::Float32);
}

// Linear(3, 4) -> BatchNorm1d(4) -> ReLU; `fused`: the last two fused into a BatchNorm1dReLU.
std::shared_ptr<Sequential> net(bool fused = false) {
  auto m = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Linear>(3, 4), std::make_shared<BatchNorm1d>(4), std::make_shared<ReLU>()});
  if (fused) REQUIRE(fuse_modules(*m).batch_norm_relu == 1);
  return m;
}

}  // namespace

TEST_CASE("bn_train_no_grad warns once naming the layer and counts later forwards", "[mode_checks][batchnorm]") {
  Capture c(ModeChecks::Warn);
  BatchNorm1d bn(64);
  const Tensor x = batch(8, 64, 1);
  {
    NoGradGuard ng;
    bn(x);
    bn(x);
  }
  REQUIRE(c.got.size() == 1);
  CHECK(c.got[0].kind == "bn_train_no_grad");
  CHECK(c.got[0].source == "mode_checks");
  CHECK(contains(c.got[0].message, "BatchNorm1d(64) ran forward in train mode under NoGradGuard"));
  CHECK(contains(c.got[0].message, "model.eval()"));
  CHECK(mode_issue_count("bn_train_no_grad") == 2);
  CHECK(bn.batches_tracked() == 2);  // the checks only read: the forwards ran as before
  bn(x);  // with gradients: not a mistake
  CHECK(mode_issue_count("bn_train_no_grad") == 2);
}

TEST_CASE("bn_train_no_grad covers the fused BatchNorm1dReLU, BatchNorm2d and BatchRenorm", "[mode_checks][batchnorm]") {
  Capture c(ModeChecks::Warn);
  auto m = net(true);
  BatchNorm2d bn2(3);
  BatchRenorm1d renorm(5);
  {
    NoGradGuard ng;
    (*m)(batch(6, 3, 2));
    CHECK(mode_issue_count("bn_train_no_grad") == 1);
    bn2(test::rand64({2, 3, 2, 2}, 3).to(Dtype::Float32));
    CHECK(mode_issue_count("bn_train_no_grad") == 2);
    renorm(batch(6, 5, 4));
    CHECK(mode_issue_count("bn_train_no_grad") == 3);
  }
  REQUIRE(c.got.size() == 1);
  CHECK(contains(c.got[0].message, "BatchNorm1dReLU(4) ran forward in train mode"));  // the fused module, by its name
}

TEST_CASE("bn_train_no_grad covers InstanceNorm with running statistics", "[mode_checks][norms]") {
  Capture c(ModeChecks::Warn);
  InstanceNormOptions o;
  o.track_running_stats = true;
  InstanceNorm1d tracked(3, o), plain(3);
  const Tensor x = test::rand64({2, 3, 5}, 12).to(Dtype::Float32);
  NoGradGuard ng;
  plain(x);  // no running statistics: nothing leaks
  CHECK(mode_issue_count("bn_train_no_grad") == 0);
  tracked(x);
  REQUIRE(c.got.size() == 1);
  CHECK(contains(c.got[0].message, "InstanceNorm1d(3) ran forward in train mode under NoGradGuard"));
  set_mode_checks(ModeChecks::Throw);
  const std::vector<double> before = tracked.running_mean.to_vector();
  CHECK_THROWS_AS(tracked(x), std::logic_error);
  CHECK(tracked.running_mean.to_vector() == before);
}

TEST_CASE("bn_train_no_grad throws in Throw mode before the running statistics change", "[mode_checks][batchnorm][errors]") {
  Capture c(ModeChecks::Throw);
  auto m = net(true);
  auto& bn = dynamic_cast<BatchNorm1d&>(*m->named_children()[1].second);
  NoGradGuard ng;
  CHECK_THROWS_AS((*m)(batch(6, 3, 2)), std::logic_error);
  CHECK_THROWS_WITH(bn(batch(6, 4, 2)), Catch::Contains("BatchNorm1dReLU(4) ran forward in train mode under NoGradGuard"));
  CHECK(bn.batches_tracked() == 0);
  CHECK(bn.running_mean.to_vector() == std::vector<double>(4, 0.0));
  CHECK(bn.running_var.to_vector() == std::vector<double>(4, 1.0));
  CHECK(c.got.empty());
}

TEST_CASE("the batch-norm checks are silent when paused or off", "[mode_checks][batchnorm]") {
  Capture c(ModeChecks::Throw);
  BatchNorm1d bn(4);
  {
    NoGradGuard ng;
    ModeChecksPause pause;
    bn(batch(6, 4, 5));
  }
  BatchNorm1d fresh(4);
  fresh.eval();
  {
    ModeChecksPause pause;
    fresh(batch(6, 4, 5));
  }
  set_mode_checks(ModeChecks::Off);
  {
    NoGradGuard ng;
    bn(batch(6, 4, 5));
  }
  fresh(batch(6, 4, 5));
  CHECK(mode_issue_counts().empty());
  CHECK(c.got.empty());
  CHECK(bn.batches_tracked() == 2);
}

TEST_CASE("never_updated_stats warns once per layer in eval mode on initial statistics", "[mode_checks][batchnorm]") {
  Capture c(ModeChecks::Warn);
  BatchNorm1d a(64), b(4), trained(4);
  {
    ModeChecksPause p;  // a train-mode forward without backward, on purpose: statistics updated
    trained(batch(6, 4, 6));
  }
  a.eval();
  b.eval();
  trained.eval();
  a(batch(6, 64, 7));
  a(batch(6, 64, 7));
  REQUIRE(c.got.size() == 1);
  CHECK(c.got[0].kind == "never_updated_stats");
  CHECK(contains(c.got[0].message, "BatchNorm1d(64) ran forward in eval mode on running statistics that were never "
                                   "updated (num_batches_tracked 0, running_mean all 0, running_var all 1)"));
  CHECK(mode_issue_count("never_updated_stats") == 1);
  b(batch(6, 4, 8));
  trained(batch(6, 4, 8));
  CHECK(mode_issue_count("never_updated_stats") == 2);
  CHECK(c.got.size() == 1);
  // the fused BatchNorm1dReLU too
  auto m = net(true);
  m->eval();
  (*m)(batch(6, 3, 9));
  CHECK(mode_issue_count("never_updated_stats") == 3);
}

TEST_CASE("never_updated_stats throws in Throw mode", "[mode_checks][batchnorm][errors]") {
  Capture c(ModeChecks::Throw);
  BatchNorm1d a(4);
  a.eval();
  CHECK_THROWS_AS(a(batch(6, 4, 7)), std::logic_error);
  CHECK_THROWS_WITH(a(batch(6, 4, 7)), Catch::Contains("BatchNorm1d(4) ran forward in eval mode"));
}

TEST_CASE("bn_buffers_not_loaded warns for a non-strict load of a weights-only state dict", "[mode_checks][batchnorm]") {
  Capture c(ModeChecks::Warn);
  auto trained = net();
  trained->train();
  {
    ModeChecksPause p;  // statistics updated without a backward, on purpose
    (*trained)(batch(6, 3, 10));
  }
  StateDict weights;  // parameters only, as a weights-only file holds
  for (const auto& [k, v] : trained->state_dict())
    if (!contains(k, "running_") && !contains(k, "num_batches")) weights.insert(k, v);
  auto fresh = net();
  const LoadResult r = fresh->load_state_dict(weights, false);
  CHECK(r.loaded == 4);
  REQUIRE(c.got.size() == 1);
  CHECK(c.got[0].kind == "bn_buffers_not_loaded");
  CHECK(contains(c.got[0].message, "BatchNorm1d(4) at '1' (1.running_mean, 1.running_var)"));
  CHECK(contains(c.got[0].message, "load_state_dict (strict=false)"));
  // a full state dict, or buffers that are not initial: no report
  auto other = net();
  other->load_state_dict(trained->state_dict(), false);
  auto moved = net();
  {
    ModeChecksPause p;
    (*moved)(batch(6, 3, 11));
  }
  moved->load_state_dict(weights, false);
  CHECK(mode_issue_count("bn_buffers_not_loaded") == 1);
  auto again = net();
  again->load_state_dict(weights, false);
  CHECK(mode_issue_count("bn_buffers_not_loaded") == 2);
  CHECK(c.got.size() == 1);
}

TEST_CASE("bn_buffers_not_loaded throws in Throw mode and loads nothing", "[mode_checks][batchnorm][errors]") {
  Capture c(ModeChecks::Throw);
  auto trained = net();
  (*trained)(batch(6, 3, 10));
  StateDict weights;
  for (const auto& [k, v] : trained->state_dict())
    if (!contains(k, "running_") && !contains(k, "num_batches")) weights.insert(k, v);
  auto fresh = net();
  const std::vector<double> w0 = fresh->state_dict().find("0.weight")->to_vector();
  CHECK_THROWS_AS(fresh->load_state_dict(weights, false), std::logic_error);
  CHECK(fresh->state_dict().find("0.weight")->to_vector() == w0);
  ModeChecksPause pause;
  CHECK_NOTHROW(fresh->load_state_dict(weights, false));
}
