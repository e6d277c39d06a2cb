// debug/: mode_report, ModeAudit, batch_dependence, buffers_changed, running_stats_gap,
// bn_backward_invariants. Each detector fires on its bug and stays silent on the correct loop.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/debug/diagnostics.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/sgd.h>
#include "debug/debug_test_support.h"

using namespace tapegrad;
using namespace tapegrad::debug;
using tapegrad::layers::BatchNorm1d;
using tapegrad::layers::BatchNormOptions;

namespace {

using debug_test::small_bn_net;

ModeAuditOptions quiet(ModeAuditOptions o = {}) {
  o.log_limit = 0;
  return o;
}

void sgd_step(layers::Module& net, optim::SGD& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = layers::mse_loss(net(x), y);
  loss.backward();
  opt.step();
}

BatchNormOptions f64() {
  BatchNormOptions o;
  o.dtype = Dtype::Float64;
  return o;
}

}  // namespace

// ---- mode_report ------------------------------------------------------------------------

TEST_CASE("mode_report lists modes, shapes and whether running stats were ever updated", "[debug]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  auto net = small_bn_net();
  ModeReport r = mode_report(*net);
  REQUIRE(r.modules.size() == 5);  // root + 4 children
  REQUIRE(r.all_training());
  REQUIRE(r.never_updated() == std::vector<std::string>{"1"});
  REQUIRE(r.modules[1].path == "0");
  REQUIRE(r.modules[1].parameters.size() == 2);
  REQUIRE(r.modules[1].parameters[0].shape == Shape{6, 4});
  REQUIRE(r.modules[2].type == "BatchNorm1d");
  REQUIRE(r.modules[2].buffers.size() == 3);
  REQUIRE(r.modules[2].num_batches_tracked == 0);
  REQUIRE(r.modules[3].num_batches_tracked == -1);  // ReLU: no such buffer
  REQUIRE_THAT(r.to_string(), Catch::Contains("NEVER UPDATED") && Catch::Contains("weight [6, 4]") &&
                                  Catch::Contains("all 5 modules in train mode"));

  Generator g(3);
  (*net)(randn({8, 4}, Dtype::Float32, g));
  r = mode_report(*net);
  REQUIRE(r.never_updated().empty());
  REQUIRE(r.modules[2].stats_updated);
  REQUIRE(r.modules[2].num_batches_tracked == 1);

  (*net)[1]->eval();
  r = mode_report(*net);
  REQUIRE(!r.all_training());
  REQUIRE(!r.all_eval());
  REQUIRE(r.modules_in_mode(false) == std::vector<std::string>{"1"});
  REQUIRE_THAT(r.to_string(), Catch::Contains("mixed modes: 4 train, 1 eval"));
  net->eval();
  REQUIRE(mode_report(*net).all_eval());
}

TEST_CASE("mode_report: stats loaded from a checkpoint count as updated even with num_batches_tracked 0", "[debug]") {
  BatchNorm1d bn(3);
  bn.running_var.fill_(2.0);
  auto r = mode_report(bn);
  REQUIRE(r.modules[0].num_batches_tracked == 0);
  REQUIRE(r.modules[0].stats_updated);
  BatchNormOptions untracked;
  untracked.track_running_stats = false;
  BatchNorm1d plain(3, untracked);
  REQUIRE(!mode_report(plain).modules[0].has_running_stats);
  REQUIRE(mode_report(plain).never_updated().empty());
}

// ---- ModeAudit ------------------------------------------------------------------------

TEST_CASE("ModeAudit: BatchNorm forward in train mode under no-grad fires, eval-mode evaluation is silent", "[debug]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  auto net = small_bn_net();
  Generator g(4);
  Tensor x = randn({8, 4}, Dtype::Float32, g);
  ModeAudit audit(*net, quiet());
  sum((*net)(x)).backward();  // training forward with gradients, reaching backward(): fine
  {
    NoGradGuard ng;
    net->eval();
    (*net)(x);  // correct evaluation
  }
  REQUIRE(audit.clean());
  net->train();
  {
    NoGradGuard ng;
    (*net)(x);  // evaluation in train mode
  }
  REQUIRE(audit.count(Issue::BnTrainNoGrad) == 1);
  auto f = audit.findings();
  REQUIRE(f.size() == 1);
  REQUIRE(f[0].module == "1");
  REQUIRE_THAT(f[0].message, Catch::Contains("'1' (BatchNorm1d)") && Catch::Contains("running_mean"));
  REQUIRE(audit.counts().forwards == 15);  // 3 forwards x (root + 4 children)
  REQUIRE_THAT(audit.summary(), Catch::Contains("bn_train_no_grad x1"));
}

TEST_CASE("ModeAudit: a BatchNorm without running stats, AuditPause and other models stay silent", "[debug]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  BatchNormOptions untracked;
  untracked.track_running_stats = false;
  BatchNorm1d plain(3, untracked);
  auto other = small_bn_net();
  Generator g(5);
  ModeAudit audit(plain, quiet());
  NoGradGuard ng;
  plain(randn({4, 3}, Dtype::Float32, g));
  (*other)(randn({4, 4}, Dtype::Float32, g));  // not the audited model
  REQUIRE(audit.clean());
  REQUIRE(audit.counts().forwards == 1);
  ModeAudit audit2(*other, quiet());
  {
    AuditPause pause;
    (*other)(randn({4, 4}, Dtype::Float32, g));
  }
  REQUIRE(audit2.clean());
  REQUIRE(audit2.counts().forwards == 0);
}

TEST_CASE("ModeAudit: throw_on_issue turns the first finding into an exception naming it", "[debug]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  auto net = small_bn_net();
  ModeAuditOptions o = quiet();
  o.throw_on_issue = true;
  ModeAudit audit(*net, o);
  Generator g(6);
  NoGradGuard ng;
  REQUIRE_THROWS_WITH((*net)(randn({8, 4}, Dtype::Float32, g)),
                      Catch::Contains("bn_train_no_grad") && Catch::Contains("BatchNorm1d"));
}

TEST_CASE("ModeAudit: optimizer step with a module in eval mode fires; train() and allow_eval silence it", "[debug]") {
  auto net = small_bn_net();
  Generator g(7);
  Tensor x = randn({8, 4}, Dtype::Float32, g), y = randn({8, 1}, Dtype::Float32, g);
  optim::SGD opt(net->parameters(), {});
  ModeAudit audit(*net, quiet());
  sgd_step(*net, opt, x, y);
  REQUIRE(audit.clean());
  net->eval();  // validation ...
  sgd_step(*net, opt, x, y);  // ... and train() forgotten
  REQUIRE(audit.count(Issue::StepInEval) == 1);
  REQUIRE_THAT(audit.findings()[0].message, Catch::Contains("5 module(s)") && Catch::Contains("train()"));
  net->train();
  sgd_step(*net, opt, x, y);
  REQUIRE(audit.count(Issue::StepInEval) == 1);
  REQUIRE(audit.counts().steps == 3);

  // an optimizer over other parameters is not the audited model's step
  Tensor other = Tensor::zeros({3}, Dtype::Float32);
  other.requires_grad_();
  optim::SGD opt2({other}, {});
  net->eval();
  opt2.step();
  REQUIRE(audit.count(Issue::StepInEval) == 1);
  REQUIRE(audit.counts().steps == 3);

  // deliberate freezing of the BatchNorm only
  net->train();
  (*net)[1]->eval();
  ModeAuditOptions o = quiet();
  o.allow_eval = {"1"};
  ModeAudit allowed(*net, o);
  sgd_step(*net, opt, x, y);
  REQUIRE(allowed.clean());
}

TEST_CASE("ModeAudit: running statistics frozen across K steps fire; the correct loop is silent", "[debug]") {
  Generator g(8);
  Tensor x = randn({8, 4}, Dtype::Float32, g), y = randn({8, 1}, Dtype::Float32, g);
  ModeAuditOptions o = quiet();
  o.stats_check_every = 3;
  o.step_in_eval = false;  // isolate the frozen-stats detector
  for (int buggy = 0; buggy < 2; ++buggy) {
    auto net = small_bn_net();
    optim::SGD opt(net->parameters(), {});
    ModeAudit audit(*net, o);
    for (int step = 0; step < 10; ++step) {
      if (buggy && step >= 1) net->eval();
      sgd_step(*net, opt, x, y);
    }
    // snapshots at steps 1, 4, 7, 10: the buggy loop changed nothing after step 1
    REQUIRE(audit.count(Issue::FrozenRunningStats) == (buggy ? 3 : 0));
    if (buggy) REQUIRE_THAT(audit.findings()[0].message, Catch::Contains("in eval mode") && Catch::Contains("3 optimizer steps"));
  }
  REQUIRE_THROWS_WITH(ModeAudit(*small_bn_net(), [] {
                        ModeAuditOptions b;
                        b.stats_check_every = 0;
                        return b;
                      }()),
                      Catch::Contains("stats_check_every") && Catch::Contains("0"));
}

TEST_CASE("ModeAudit: Dropout active inside a no-grad evaluation fires", "[debug]") {
  Generator g(9);
  layers::Sequential net{std::make_shared<layers::Linear>(4, 4, true, Dtype::Float32, g),
                         std::make_shared<layers::Dropout>(0.5)};
  layers::Sequential off{std::make_shared<layers::Dropout>(0.0)};
  Tensor x = randn({2, 4}, Dtype::Float32, g);
  ModeAudit audit(net, quiet());
  ModeAudit audit_off(off, quiet());
  NoGradGuard ng;
  net.eval();
  net(x);
  REQUIRE(audit.clean());
  net.train();
  net(x);
  off(x);
  REQUIRE(audit.count(Issue::DropoutNoGrad) == 1);
  REQUIRE(audit.findings()[0].module == "1");
  REQUIRE(audit_off.clean());  // p = 0 drops nothing
}

// ---- batch_dependence ------------------------------------------------------------------

TEST_CASE("batch_dependence: exact value for a one-channel BatchNorm, zero in eval mode, buffers restored", "[debug]") {
  BatchNorm1d bn(1, f64());
  Tensor x = Tensor::from_vector({0, 2, 4}, {3, 1}, Dtype::Float64);
  BatchDependenceOptions o;
  o.max_samples = 1;
  o.trials = 3;
  o.companions = 1;
  o.pool = Tensor::from_vector({10}, {1, 1}, Dtype::Float64);
  const auto before = snapshot_buffers(bn);
  auto r = batch_dependence(bn, x, o);
  // torch: BatchNorm1d(1) in train mode, float64: output of 0 in [0, 2, 4] is -1.2247425750014138,
  // in [0, 10] it is -0.9999998000000601; difference 0.22474277500135376
  REQUIRE(r.max_abs_diff == Approx(0.22474277500135376).epsilon(1e-12));
  REQUIRE(r.alone_refused);
  REQUIRE_THAT(r.alone_error, Catch::Contains("more than 1 value per channel"));
  REQUIRE(std::isnan(r.alone_max_abs_diff));
  REQUIRE(r.depends());
  REQUIRE(r.trials == 3);
  REQUIRE(buffers_changed(before, bn.state_dict()).empty());  // running stats not corrupted
  REQUIRE(bn.is_training());

  bn.eval();
  r = batch_dependence(bn, x, o);
  REQUIRE(!r.alone_refused);
  REQUIRE(r.max_abs_diff == 0.0);
  REQUIRE(!r.depends());
}

TEST_CASE("batch_dependence on a network: positive in train mode, rounding-level in eval mode", "[debug]") {
  auto net = small_bn_net();
  Generator g(10);
  Tensor x = randn({16, 4}, Dtype::Float32, g);
  const auto before = snapshot_buffers(*net);
  const auto train = batch_dependence(*net, x);
  REQUIRE(train.max_abs_diff > 1e-2);
  REQUIRE(train.samples == 16);
  REQUIRE(train.trials == 16 * 8);
  REQUIRE(buffers_changed(before, snapshot_buffers(*net)).empty());
  net->eval();
  const auto eval = batch_dependence(*net, x);
  REQUIRE(eval.max_abs_diff < 1e-5);
  REQUIRE(eval.alone_max_abs_diff < 1e-5);

  Tensor wrong = randn({4, 5}, Dtype::Float32, g);
  BatchDependenceOptions o;
  o.pool = wrong;
  REQUIRE_THROWS_WITH(batch_dependence(*net, x, o), Catch::Contains("[16, 4]") && Catch::Contains("[4, 5]"));
}

// ---- buffers_changed -------------------------------------------------------------------

TEST_CASE("buffers_changed: a train-mode evaluation mutates the running stats, eval mode does not", "[debug]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  BatchNorm1d bn(2, f64());
  Tensor x = Tensor::from_vector({1, 2, 3, 6}, {2, 2}, Dtype::Float64);
  auto before = snapshot_buffers(bn);
  {
    NoGradGuard ng;
    bn.eval();
    bn(x);
  }
  REQUIRE(buffers_changed(before, bn.state_dict()).empty());
  REQUIRE(to_string(buffers_changed(before, bn.state_dict())) == "no buffer changed\n");
  {
    NoGradGuard ng;
    bn.train();
    bn(x);
  }
  // torch: BatchNorm1d(2)(tensor([[1., 2.], [3., 6.]])) -> running_mean [0.2, 0.4],
  // running_var [1.1, 1.7], num_batches_tracked 1
  auto ch = buffers_changed(before, bn.state_dict());
  REQUIRE(ch.size() == 3);
  REQUIRE(ch[0].key == "running_mean");
  REQUIRE(ch[0].max_abs_change == Approx(0.4).epsilon(1e-12));
  REQUIRE(ch[1].key == "running_var");
  REQUIRE(ch[1].max_abs_change == Approx(0.7).epsilon(1e-12));
  REQUIRE(ch[1].changed_elements == 2);
  REQUIRE(ch[2].key == "num_batches_tracked");
  REQUIRE(ch[2].max_abs_change == 1.0);
  REQUIRE(buffers_changed(before, bn.state_dict(), 0.5).size() == 2);  // 0.4 is within tol

  layers::StateDict partial;
  partial.insert("running_mean", bn.running_mean);
  auto missing = buffers_changed(before, partial);
  REQUIRE(missing.size() == 3);
  REQUIRE(missing[1].note == "missing after");

  restore_buffers(bn, before);
  REQUIRE(bn.running_var.to_vector() == std::vector<double>{1, 1});
  REQUIRE(bn.batches_tracked() == 0);
  layers::StateDict bad;
  bad.insert("running_mean", Tensor::zeros({3}, Dtype::Float64));
  REQUIRE_THROWS_WITH(restore_buffers(bn, bad), Catch::Contains("[2]") && Catch::Contains("[3]"));
}

// ---- running_stats_gap ------------------------------------------------------------------

TEST_CASE("running_stats_gap: hand-computed gap; modes and buffers restored", "[debug]") {
  BatchNorm1d bn(1, f64());
  bn.running_mean.fill_(1.0);
  bn.running_var.fill_(4.0);
  bn.eval();
  Tensor x = Tensor::from_vector({0, 2, 4}, {3, 1}, Dtype::Float64);
  auto r = running_stats_gap(bn, x);
  REQUIRE(r.modules.size() == 1);
  // data mean 2, unbiased variance 4: |1 - 2| / sqrt(4 + 1e-5) = 0.49999937500117186
  REQUIRE(r.modules[0].max_mean_gap == Approx(0.49999937500117186).epsilon(1e-12));
  REQUIRE(r.modules[0].max_var_log_ratio == Approx(0.0).margin(1e-12));
  REQUIRE(!r.stale());
  REQUIRE(r.stale(0.4));
  REQUIRE(!bn.is_training());
  REQUIRE(bn.running_mean.item() == 1.0);
  REQUIRE(bn.batches_tracked() == 0);
}

// ---- bn_backward_invariants --------------------------------------------------------------

TEST_CASE("bn_backward_invariants: the fused kernel passes, an eval-mode backward in train mode fails", "[debug]") {
  Generator g(11);
  Tensor x = randn({16, 5}, Dtype::Float64, g);
  x.requires_grad_();
  Tensor dy = randn({16, 5}, Dtype::Float64, g);
  Tensor y = layers::functional::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 0.0);
  sum(mul(y, dy)).backward();
  auto ok = bn_backward_invariants(x, x.grad());
  REQUIRE(ok.col_sum < 1e-12);
  REQUIRE(ok.col_dot_xhat < 1e-12);
  REQUIRE(ok.ok());
  // dy itself is the gradient of a layer without the statistics' paths
  auto bad = bn_backward_invariants(x, dy);
  REQUIRE(!bad.ok());
  REQUIRE(bad.col_sum > 1e-2);
  REQUIRE_THROWS_WITH(bn_backward_invariants(x, Tensor::zeros({16, 4}, Dtype::Float64)),
                      Catch::Contains("[16, 5]") && Catch::Contains("[16, 4]"));
}

TEST_CASE("ModeAudit: step_in_eval also fires for Adam (every optimizer calls the step hooks)", "[debug]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  auto net = small_bn_net();
  Generator g(12);
  Tensor x = randn({8, 4}, Dtype::Float32, g), y = randn({8, 1}, Dtype::Float32, g);
  optim::Adam adam(net->parameters());
  ModeAudit audit(*net, quiet());
  net->eval();
  adam.zero_grad();
  layers::mse_loss((*net)(x), y).backward();
  adam.step();
  REQUIRE(audit.count(Issue::StepInEval) == 1);
  REQUIRE(audit.counts().steps == 1);
}

TEST_CASE("ModeAudit::refresh picks up modules added after the audit started", "[debug]") {
  tapegrad::ModeChecksPause pause;  // the audit's detectors are tested on deliberate mode bugs
  layers::Sequential net;
  Generator g(13);
  net.push_back(std::make_shared<layers::Linear>(3, 3, true, Dtype::Float32, g));
  ModeAudit audit(net, quiet());
  net.push_back(std::make_shared<BatchNorm1d>(3));
  Tensor x = randn({4, 3}, Dtype::Float32, g);
  NoGradGuard ng;
  net(x);
  REQUIRE(audit.clean());  // the BatchNorm is not known yet
  audit.refresh();
  net(x);
  REQUIRE(audit.count(Issue::BnTrainNoGrad) == 1);
}
