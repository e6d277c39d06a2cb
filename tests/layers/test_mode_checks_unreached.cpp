// The default mode check bn_train_no_backward (core/mode_checks.h): a tracked BatchNorm or
// InstanceNorm forward in train mode with gradients on whose graph is freed without a backward
// warns once naming the layer; a graph that reached backward, one freed while an exception
// unwinds, a paused forward and an untracked layer are silent; under Throw the error is raised
// at the next tracked forward.
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include "mode_checks_support.h"
#include "test_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Tensor batch(std::int64_t n, std::int64_t c, std::uint64_t seed) { return test::rand64({n, c}, seed).to(Dtype::Float32); }

}  // namespace

TEST_CASE("bn_train_no_backward warns once when a train-mode graph is freed unreached", "[mode_checks][batchnorm]") {
  ModeChecksCapture c(ModeChecks::Warn);
  BatchNorm1d bn(16);
  const Tensor x = batch(8, 16, 1);
  { const Tensor y = bn(x); }  // a validation forward in train mode: its graph goes unreached
  REQUIRE(c.got.size() == 1);
  CHECK(c.got[0].kind == "bn_train_no_backward");
  CHECK(c.got[0].source == "mode_checks");
  CHECK(contains(c.got[0].message, "BatchNorm1d(16) ran forward in train mode with gradients on"));
  CHECK(contains(c.got[0].message, "model.eval()"));
  { const Tensor y = bn(x); }
  CHECK(c.got.size() == 1);  // one warning per kind
  CHECK(mode_issue_count("bn_train_no_backward") == 2);
  CHECK(bn.batches_tracked() == 2);  // the check only reads
}

TEST_CASE("bn_train_no_backward is silent when the graph reaches backward", "[mode_checks][batchnorm]") {
  ModeChecksCapture c(ModeChecks::Warn);
  // the fused BatchNorm1dReLU (fuse_modules) and BatchNorm2d
  Sequential net({std::make_shared<Linear>(3, 4), std::make_shared<BatchNorm1d>(4), std::make_shared<ReLU>()});
  REQUIRE(fuse_modules(net).batch_norm_relu == 1);
  BatchNorm2d bn2(3);
  for (int step = 0; step < 3; ++step) {
    sum(net(batch(6, 3, 10 + step))).backward();
    sum(bn2(test::rand64({2, 3, 4, 4}, 20 + step).to(Dtype::Float32))).backward();
  }
  // a graph taken apart by autograd::grad counts as reached too
  BatchNorm1d bn(5);
  const Tensor loss = sum(bn(batch(4, 5, 30)));
  const auto g = autograd::grad({loss}, {bn.weight});
  CHECK(g[0].defined());
  CHECK(c.got.empty());
  CHECK(mode_issue_count("bn_train_no_backward") == 0);
}

TEST_CASE("bn_train_no_backward: the fused BatchNorm1dReLU, BatchNorm2d and a tracked InstanceNorm are watched",
          "[mode_checks][batchnorm][norms]") {
  ModeChecksCapture c(ModeChecks::Warn);
  Sequential net({std::make_shared<Linear>(3, 4), std::make_shared<BatchNorm1d>(4), std::make_shared<ReLU>()});
  REQUIRE(fuse_modules(net).batch_norm_relu == 1);
  { const Tensor y = net(batch(6, 3, 2)); }
  CHECK(mode_issue_count("bn_train_no_backward") == 1);
  BatchNorm2d bn2(3);
  { const Tensor y = bn2(test::rand64({2, 3, 4, 4}, 3).to(Dtype::Float32)); }
  CHECK(mode_issue_count("bn_train_no_backward") == 2);
  InstanceNormOptions io;
  io.affine = true;
  io.track_running_stats = true;
  InstanceNorm2d in(3, io);
  { const Tensor y = in(test::rand64({2, 3, 4, 4}, 4).to(Dtype::Float32)); }
  CHECK(mode_issue_count("bn_train_no_backward") == 3);
  REQUIRE(c.got.size() == 1);
  CHECK(contains(c.got[0].message, "BatchNorm1dReLU(4)"));  // the fused module, named as it is
}

TEST_CASE("bn_train_no_backward is silent for eval mode, no running statistics, a pause, an unwinding exception",
          "[mode_checks][batchnorm]") {
  ModeChecksCapture c(ModeChecks::Warn);
  const Tensor x = batch(8, 6, 5);
  BatchNorm1d bn(6);
  sum(bn(x)).backward();  // statistics updated once, so eval mode has no never_updated_stats to say
  bn.eval();
  { const Tensor y = bn(x); }  // eval: running statistics untouched
  bn.train();
  BatchNormOptions untracked_options;
  untracked_options.track_running_stats = false;
  BatchNorm1d untracked(6, untracked_options);
  { const Tensor y = untracked(x); }  // nothing is written by an untracked forward
  {
    ModeChecksPause pause;  // a deliberate train-mode forward without backward
    const Tensor y = bn(x);
  }
  try {
    const Tensor y = bn(x);
    throw std::runtime_error("a step rejected");  // y's graph is freed while unwinding
  } catch (const std::runtime_error&) {
  }
  set_mode_checks(ModeChecks::Off);
  { const Tensor y = bn(x); }
  CHECK(c.got.empty());
  CHECK(mode_issue_count("bn_train_no_backward") == 0);
}

TEST_CASE("bn_train_no_backward under Throw raises at the next tracked forward", "[mode_checks][batchnorm][errors]") {
  ModeChecksCapture c(ModeChecks::Throw);
  BatchNorm1d bn(7);
  const Tensor x = batch(4, 7, 6);
  { const Tensor y = bn(x); }  // freed unreached: the error waits (a destructor cannot throw)
  CHECK(mode_issue_count("bn_train_no_backward") == 1);
  const std::int64_t tracked = bn.batches_tracked();
  try {
    sum(bn(x)).backward();
    FAIL("expected the pending bn_train_no_backward error");
  } catch (const std::logic_error& e) {
    CHECK(contains(e.what(), "BatchNorm1d(7) ran forward in train mode with gradients on"));
  }
  CHECK(bn.batches_tracked() == tracked);  // raised before the buffers changed
  sum(bn(x)).backward();                    // raised once: the next step runs
  CHECK(bn.batches_tracked() == tracked + 1);
  CHECK(c.got.empty());
}
