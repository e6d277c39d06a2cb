#include "kit/mode_bugs.h"

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <numeric>
#include <stdexcept>


#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/debug/batch_dependence.h>
#include <tapegrad/debug/buffers.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/debug/mode_report.h>
#include <tapegrad/debug/row_selection.h>
#include <tapegrad/debug/stats_gap.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/sgd.h>
#include "kit/temp_dir.h"

namespace studies::kit {

using namespace tapegrad;
using namespace tapegrad::debug;

namespace {

double max_change(const std::vector<BufferChange>& ch, const std::string& suffix) {
  double m = 0;
  for (auto& c : ch)
    if (c.key.size() >= suffix.size() && c.key.compare(c.key.size() - suffix.size(), suffix.size(), suffix) == 0)
      m = std::max(m, c.max_abs_change);
  return m;
}

double max_running_change(const layers::StateDict& before, const layers::StateDict& after) {
  const auto ch = buffers_changed(before, after);
  return std::max(max_change(ch, "running_mean"), max_change(ch, "running_var"));
}

// A trained model for the scenarios that start from one.
std::shared_ptr<layers::Sequential> trained_net(const RegressionData& d, int epochs, NetOptions no = {}) {
  auto net = make_net(no);
  TrainConfig tc;
  tc.epochs = epochs;
  tc.validation = Validation::None;
  train_regression(*net, d, tc);
  return net;
}

// An audit that only counts (no log lines): the measurements read its counts.
ModeAuditOptions silent_audit() {
  ModeAuditOptions o;
  o.log_limit = 0;
  return o;
}

}  // namespace

TrainModeInference measure_train_mode_inference(std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  auto net = trained_net(d, 40);
  TrainModeInference r;
  BatchDependenceOptions bo;
  bo.max_samples = 10;
  bo.trials = 20;
  bo.companions = 31;
  net->eval();
  r.eval_dependence = batch_dependence(*net, d.x_test, bo).max_abs_diff;
  net->train();
  const auto tr = batch_dependence(*net, d.x_test, bo);
  r.train_dependence = tr.companions_max_abs_diff;
  r.batch_of_one_error = tr.alone_error;
  const auto saved = snapshot_buffers(*net);
  {
    ModeAudit audit(*net, silent_audit());
    NoGradGuard ng;
    (*net)(d.x_test);  // a "prediction" with the model left in train mode
    r.audit_bn_train_no_grad = audit.count(Issue::BnTrainNoGrad);
  }
  restore_buffers(*net, saved);
  return r;
}

ForgottenTrain measure_forgotten_train(int epochs, std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  ForgottenTrain r;
  const ModeAuditOptions ao = silent_audit();
  for (int buggy = 0; buggy < 2; ++buggy) {
    auto net = make_net();
    ModeAudit audit(*net, ao);
    TrainConfig tc;
    tc.validation = buggy ? Validation::ForgetTrain : Validation::Correct;
    tc.epochs = 1;
    TrainLog log = train_regression(*net, d, tc);
    const auto after1 = snapshot_buffers(*net);
    tc.epochs = epochs - 1;
    tc.shuffle_seed += 1;
    TrainLog rest = train_regression(*net, d, tc);
    for (auto* v : {&log.train_loss, &log.val_loss, &log.eval_loss}) {
      const auto& src = v == &log.train_loss ? rest.train_loss : v == &log.val_loss ? rest.val_loss : rest.eval_loss;
      v->insert(v->end(), src.begin(), src.end());
    }
    const double change = max_running_change(after1, snapshot_buffers(*net));
    if (buggy) {
      r.buggy = log;
      r.buggy_stats_change = change;
      r.audit_step_in_eval = audit.count(Issue::StepInEval);
      r.audit_frozen_stats = audit.count(Issue::FrozenRunningStats);
    } else {
      r.correct = log;
      r.correct_stats_change = change;
      r.audit_correct_issues = audit.counts().issues();
    }
  }
  return r;
}

TestLeak measure_test_leak(std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  auto net = trained_net(d, 40);
  TestLeak r;
  const ModeAuditOptions ao = silent_audit();
  {  // the correct evaluation, for contrast
    const auto before = snapshot_buffers(*net);
    ModeAudit audit(*net, ao);
    for (int i = 0; i < 10; ++i) {
      net->eval();
      NoGradGuard ng;
      layers::mse_loss((*net)(d.x_test), d.y_test);
    }
    net->train();
    r.audit_correct_issues = audit.counts().issues();
    r.correct_changed_buffers = !buffers_changed(before, snapshot_buffers(*net)).empty();
  }
  r.eval_before = eval_mse(*net, d.x_test, d.y_test);
  const auto before = snapshot_buffers(*net);
  ModeAudit audit(*net, ao);
  for (int i = 1; i <= 10; ++i) {
    {
      NoGradGuard ng;  // the chapter's evaluation: no-grad, but still in train mode
      const double l = layers::mse_loss((*net)(d.x_test), d.y_test).item();
      if (i == 1) r.reported_loss = l;
    }
    if (i == 1 || i == 10) {
      const auto ch = buffers_changed(before, snapshot_buffers(*net));
      const double em = eval_mse(*net, d.x_test, d.y_test);
      if (i == 1) {
        r.eval_after_1 = em;
        r.mean_change_1 = max_change(ch, "running_mean");
        r.var_change_1 = max_change(ch, "running_var");
        for (auto& c : ch) r.changed_buffers.push_back(c.key);
      } else {
        r.eval_after_10 = em;
        r.mean_change_10 = max_change(ch, "running_mean");
        r.var_change_10 = max_change(ch, "running_var");
      }
    }
  }
  r.audit_bn_train_no_grad = audit.count(Issue::BnTrainNoGrad);
  return r;
}

MomentumMixup measure_momentum_mixup(int epochs, std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  MomentumMixup r;
  std::vector<std::shared_ptr<layers::Sequential>> nets;
  for (double mom : {0.01, 0.99, 0.1}) {
    NetOptions no;
    no.momentum = mom;
    nets.push_back(trained_net(d, epochs, no));
  }
  auto eval_and_gap = [&](layers::Module& n, double& ev, double& gap, double& vgap) {
    ev = eval_mse(n, d.x_test, d.y_test);
    const auto g = running_stats_gap(n, d.x_train);
    gap = g.worst_mean_gap();
    vgap = g.worst_var_log_ratio();
  };
  eval_and_gap(*nets[0], r.eval_intended, r.gap_intended, r.var_gap_intended);
  eval_and_gap(*nets[1], r.eval_mixed, r.gap_mixed, r.var_gap_mixed);
  eval_and_gap(*nets[2], r.eval_default, r.gap_default, r.var_gap_default);
  const auto p0 = nets[0]->parameters();
  for (std::size_t k = 1; k < nets.size(); ++k) {
    const auto pk = nets[k]->parameters();
    for (std::size_t i = 0; i < p0.size(); ++i) r.max_weight_diff = std::max(r.max_weight_diff, max_abs_diff(p0[i], pk[i]));
  }
  return r;
}

BiasedVariance measure_biased_variance(std::int64_t batch, int epochs, std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  BiasedVariance r;
  r.batch = batch;
  std::shared_ptr<layers::Sequential> nets[2];
  for (int biased = 0; biased < 2; ++biased) {
    NetOptions no;
    no.biased_running_var = biased;
    nets[biased] = make_net(no);
    TrainConfig tc;
    tc.epochs = epochs;
    tc.batch = batch;
    tc.validation = Validation::None;
    train_regression(*nets[biased], d, tc);
  }
  r.eval_unbiased = eval_mse(*nets[0], d.x_test, d.y_test);
  r.eval_biased = eval_mse(*nets[1], d.x_test, d.y_test);
  double sum = 0;
  std::int64_t n = 0;
  const auto b0 = nets[0]->named_buffers(), b1 = nets[1]->named_buffers();
  for (std::size_t i = 0; i < b0.size(); ++i) {
    if (b0[i].first.find("running_var") == std::string::npos) continue;
    const auto u = b0[i].second.to_vector(), b = b1[i].second.to_vector();
    for (std::size_t c = 0; c < u.size(); ++c, ++n) sum += b[c] / u[c];
  }
  r.var_ratio = n ? sum / static_cast<double>(n) : 0.0;
  r.var_gap_unbiased = running_stats_gap(*nets[0], d.x_train).worst_var_log_ratio();
  r.var_gap_biased = running_stats_gap(*nets[1], d.x_train).worst_var_log_ratio();
  return r;
}

CheckpointNoBuffers measure_checkpoint_without_buffers(std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  auto net = trained_net(d, 40);
  CheckpointNoBuffers r;
  // the classic mistake: a parameters-only file, loaded non-strictly into a fresh model
  const TempDir dir("tapegrad_mode_bugs_");  // private (kit/temp_dir.h), removed on return or throw
  const std::string path = (dir / "model.safetensors").string();
  layers::save(*net, path, /*include_buffers=*/false);
  r.used_file = true;
  NetOptions fresh;
  fresh.seed = 99;
  auto loaded = make_net(fresh);
  try {
    layers::load(*loaded, path, /*strict=*/true);
  } catch (const std::invalid_argument& e) {
    r.strict_error = e.what();
  }
  const layers::LoadResult lr = layers::load(*loaded, path, /*strict=*/false);
  r.missing = lr.missing_keys;
  r.missing_keys = lr.missing_keys.size();
  {
    NoGradGuard ng;
    AuditPause pause;
    net->eval();
    loaded->eval();
    r.max_output_diff = max_abs_diff((*net)(d.x_test), (*loaded)(d.x_test));
    net->train();
    loaded->train();
  }
  r.eval_real = eval_mse(*net, d.x_test, d.y_test);
  r.eval_loaded = eval_mse(*loaded, d.x_test, d.y_test);
  r.never_updated = mode_report(*loaded).never_updated().size();
  r.gap_loaded = running_stats_gap(*loaded, d.x_train).worst_mean_gap();
  return r;
}

FrozenFinetune measure_frozen_finetune(int pre_epochs, int ft_epochs, std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  const RegressionData shifted = make_shifted_data(seed + 7);
  auto pre = trained_net(d, pre_epochs);
  const auto pre_state = snapshot_state(*pre);
  FrozenFinetune r;
  r.eval_before = eval_mse(*pre, shifted.x_test, shifted.y_test);
  for (int frozen = 0; frozen < 2; ++frozen) {
    for (int allowed = 0; allowed < (frozen ? 2 : 1); ++allowed) {
      auto net = make_net();
      net->load_state_dict(pre_state);
      ModeAuditOptions ao = silent_audit();
      if (allowed) ao.allow_eval = batch_norm_paths(*net);
      ModeAudit audit(*net, ao);
      TrainConfig tc;
      tc.epochs = ft_epochs;
      tc.validation = Validation::None;
      tc.freeze_bn = frozen;
      tc.shuffle_seed = 5;
      train_regression(*net, shifted, tc);
      const double ev = eval_mse(*net, shifted.x_test, shifted.y_test);
      if (!frozen) {
        r.eval_train_mode = ev;
      } else if (!allowed) {
        r.eval_frozen = ev;
        r.audit_step_in_eval = audit.count(Issue::StepInEval);
      } else {
        r.audit_step_in_eval_allowed = audit.count(Issue::StepInEval);
      }
    }
  }
  return r;
}

BnBackwardCheck measure_bn_backward_invariants(std::uint64_t seed) {
  tapegrad::ModeChecksPause pause;  // a reproduction of the mode bugs: deliberate
  const RegressionData d = make_regression_data(seed);
  auto net = trained_net(d, 10);
  // the first BatchNorm's input for the first 32 training samples = the first Linear's output
  std::vector<std::int64_t> rows(32);
  std::iota(rows.begin(), rows.end(), 0);
  Tensor h;
  {
    NoGradGuard ng;
    h = (*(*net)[0])(take_rows(d.x_train, rows));
  }
  Tensor x = h.to(Dtype::Float64).detach();
  x.requires_grad_();
  auto* bn = dynamic_cast<layers::BatchNormBase*>((*net)[1].get());
  Tensor w = bn->weight.to(Dtype::Float64).detach(), b = bn->bias.to(Dtype::Float64).detach();
  Generator g(seed + 3);
  Tensor dy = randn(x.shape(), Dtype::Float64, g);
  Tensor y = layers::functional::batch_norm(x, Tensor(), Tensor(), w, b, /*training=*/true, 0.1, /*eps=*/0.0);
  sum(mul(y, dy)).backward();
  return bn_backward_invariants(x, x.grad());
}

}  // namespace studies::kit
