#include "mode_bug_study.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/debug/diagnostics.h>
#include "kit/gnuplot.h"
#include "kit/mode_bug_catalogue.h"
#include "kit/option_checks.h"
#include "kit/temp_dir.h"
#include "kit/training_options.h"
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/optim/sgd.h>

namespace normstudy {

using namespace tapegrad;
namespace fs = std::filesystem;

BugOptions quick_bug_options(BugOptions o) {
  o = studies::kit::with_quick_size(o, {.seeds = 2, .epochs = 1, .train_size = 2048, .test_size = 2000});
  return o;
}

namespace {

using studies::kit::Bug;
// The row names come from the kit's catalogue.
const std::string& name(Bug b) { return studies::kit::info(b).name; }

enum class Validation { None, Correct, ForgetTrain, TrainModeNoGrad };

struct TrainSpec {
  std::optional<double> momentum = 0.1;
  bool biased_var = false;
  std::int64_t batch = 64;
  double lr = 0.05;
  int epochs = 5;
  Validation validation = Validation::Correct;
  bool audit = false;
};

struct Trained {
  Model model;
  double accuracy = 0;  ///< eval-mode test accuracy (%) at the end, measured without side effects
  double reported = 0;  ///< the last validation accuracy the loop itself computed (%)
  debug::ModeAuditCounts audit;
  std::string audit_summary;
};

Trained train_bn(const BugOptions& o, const StudyData& d, const TrainSpec& t) {
  Trained out;
  ModelConfig mc;
  mc.norm = NormKind::Sync;  // plain BatchNorm1d
  mc.hidden = o.hidden;
  mc.bn_momentum = t.momentum;
  mc.biased_running_var = t.biased_var;
  Generator init(o.seed);
  out.model = build_model(mc, d.train.num_features(), 10, init);
  auto& net = *out.model.net;
  optim::SGD opt(net.parameters(), {.lr = t.lr, .momentum = 0.9});
  Generator shuffle(o.seed + 1000003);
  data::DataLoader loader = studies::kit::shuffled_batches(d.train, t.batch, shuffle);
  std::unique_ptr<debug::ModeAudit> audit;
  if (t.audit) {
    debug::ModeAuditOptions ao;
    ao.log_limit = 0;
    audit = std::make_unique<debug::ModeAudit>(net, ao);
  }
  net.train();
  for (int e = 0; e < t.epochs; ++e) {
    for (auto b : loader) train_step(net, opt, b.X, b.y);
    // The loop's own validation, as written (the bugs live here).
    switch (t.validation) {
      case Validation::None: break;
      case Validation::Correct: {
        net.eval();
        out.reported = 100 * evaluate_eval_mode(net, d.test).accuracy;
        net.train();
        break;
      }
      case Validation::ForgetTrain: {
        net.eval();
        out.reported = 100 * evaluate_eval_mode(net, d.test).accuracy;
        break;  // train() never called again
      }
      case Validation::TrainModeNoGrad: {
        // The chapter's loop: no-grad test pass with the model left in train mode; the
        // running statistics take the test batches.
        NoGradGuard ng;
        tapegrad::ModeChecksPause repro;  // the reproduction: deliberate
        std::int64_t correct = 0;
        for (std::int64_t i = 0; i + t.batch <= d.test.size(); i += t.batch) {
          const auto part = d.test.slice(i, i + t.batch);
          const Tensor pred = argmax(net(part.X), 1);
          for (std::int64_t k = 0; k < t.batch; ++k) correct += pred.at(k) == part.y.at(k);
        }
        out.reported = 100.0 * static_cast<double>(correct) /
                       static_cast<double>((d.test.size() / t.batch) * t.batch);
        break;
      }
    }
  }
  if (audit) {
    out.audit = audit->counts();
    out.audit_summary = audit->summary();
    audit.reset();
  }
  debug::AuditPause pause;
  out.accuracy = 100 * evaluate_eval_mode(net, d.test).accuracy;
  return out;
}

// Fashion-MNIST after a per-pixel affine change x' = a·x + b (a ~ U[0.5, 2], b ~ U[-1, 1],
// fixed by seed) of the standardised inputs: a shifted domain for fine-tuning.
data::Dataset shifted(const data::Dataset& ds, std::uint64_t seed) {
  Generator g(seed);
  const std::int64_t D = ds.num_features();
  std::vector<double> a(static_cast<std::size_t>(D)), b(a.size());
  for (std::int64_t j = 0; j < D; ++j) {
    a[static_cast<std::size_t>(j)] = 0.5 + 1.5 * g.uniform();
    b[static_cast<std::size_t>(j)] = -1.0 + 2.0 * g.uniform();
  }
  Tensor X = ds.X.clone();
  float* p = X.data<float>();
  for (std::int64_t i = 0; i < ds.size(); ++i)
    for (std::int64_t j = 0; j < D; ++j)
      p[i * D + j] = static_cast<float>(a[static_cast<std::size_t>(j)] * p[i * D + j] + b[static_cast<std::size_t>(j)]);
  return data::Dataset::make(X, ds.y);
}

// Fine-tunes a copy of `pre` on shifted training data, every BatchNorm frozen (eval mode)
// or in train mode; returns the shifted test accuracy (%) and the audit counts.
struct Finetune {
  double accuracy = 0;
  std::int64_t step_in_eval = 0, step_in_eval_allowed = 0;
};
Finetune finetune(const BugOptions& o, const StudyData& d, const data::Dataset& sh_train,
                  const data::Dataset& sh_test, const layers::StateDict& pre, bool frozen) {
  ModelConfig mc;
  mc.norm = NormKind::Sync;
  mc.hidden = o.hidden;
  Generator init(o.seed);
  Model m = build_model(mc, d.train.num_features(), 10, init);
  m.net->load_state_dict(pre, true);
  optim::SGD opt(m.net->parameters(), {.lr = o.lr * 0.2, .momentum = 0.9});
  Generator shuffle(o.seed + 77);
  data::DataLoader loader = studies::kit::shuffled_batches(sh_train, o.batch, shuffle);
  debug::ModeAuditOptions ao;
  ao.log_limit = 0;
  debug::ModeAudit audit(*m.net, ao);
  debug::ModeAuditOptions allowed = ao;
  for (auto& [path, mod] : m.net->named_modules())
    if (dynamic_cast<layers::BatchNormBase*>(mod)) allowed.allow_eval.push_back(path);
  debug::ModeAudit audit_allowed(*m.net, allowed);
  for (int e = 0; e < o.finetune_epochs; ++e) {
    m.net->train();
    if (frozen)
      for (auto* bn : m.bns) bn->eval();
    for (auto b : loader) train_step(*m.net, opt, b.X, b.y);
  }
  Finetune f;
  f.step_in_eval = audit.count(debug::Issue::StepInEval);
  f.step_in_eval_allowed = audit_allowed.count(debug::Issue::StepInEval);
  debug::AuditPause pause;
  f.accuracy = 100 * evaluate_eval_mode(*m.net, sh_test).accuracy;
  return f;
}

// Every row for the seed o.seed.
BugResult run_one_seed(const BugOptions& o, const StudyData& d) {
  tapegrad::ModeChecksPause pause;  // the reproductions of the mode bugs: deliberate
  BugResult r;
  r.options = o;
  // Phase 1: the trainings, in parallel (each single-threaded).
  const double small_lr = o.lr * static_cast<double>(o.small_batch) / static_cast<double>(o.batch);
  std::vector<TrainSpec> specs(7);
  for (auto& s : specs) s.batch = o.batch, s.lr = o.lr, s.epochs = o.epochs;
  specs[0].audit = true;                                   // correct loop
  specs[1].validation = Validation::ForgetTrain, specs[1].audit = true;
  specs[2].validation = Validation::TrainModeNoGrad, specs[2].audit = true;
  specs[3].momentum = 0.01, specs[3].validation = Validation::None;   // decay 0.99 converted correctly
  specs[4].momentum = 0.99, specs[4].validation = Validation::None;   // decay passed as momentum
  specs[5].batch = o.small_batch, specs[5].lr = small_lr, specs[5].validation = Validation::None;
  specs[6] = specs[5], specs[6].biased_var = true;
  std::vector<Trained> t(specs.size());
  run_jobs(specs.size(), o.threads, [&](std::size_t k) { t[k] = train_bn(o, d, specs[k]); });
  auto& correct = t[0];
  r.baseline_accuracy = correct.accuracy;
  auto& net = *correct.model.net;
  // Phase 2: measurements on the trained nets (no audit is alive now except those made below).

  const Tensor x_probe = d.test.slice(0, std::min<std::int64_t>(512, d.test.size())).X;
  const Tensor x_train_probe = d.train.slice(0, std::min<std::int64_t>(2048, d.train.size())).X;

  // 1. Inference in train mode at batch 1 / 8 / 64.
  {
    std::string one_error = "accepted";
    {
      NoGradGuard ng;
      const auto saved = debug::snapshot_buffers(net);
      net.train();
      try {
        net(d.test.slice(0, 1).X);
      } catch (const std::exception& e) {
        one_error = e.what();
      }
      debug::restore_buffers(net, saved);
    }
    net.train();
    const auto dep = debug::batch_dependence(net, x_probe);
    net.eval();
    const auto dep_eval = debug::batch_dependence(net, x_probe);
    std::int64_t audit_hits = 0;
    {
      debug::ModeAuditOptions ao;
      ao.log_limit = 0;
      const auto saved = debug::snapshot_buffers(net);
      net.train();
      {
        // The audit sees one train-mode no-grad prediction of 64 test images.
        debug::ModeAudit audit(net, ao);
        NoGradGuard ng;
        net(d.test.slice(0, std::min<std::int64_t>(64, d.test.size())).X);
        audit_hits = audit.count(debug::Issue::BnTrainNoGrad);
      }
      debug::restore_buffers(net, saved);
      net.eval();
    }
    for (std::int64_t b : {std::int64_t{8}, std::int64_t{64}}) {
      BugRow row;
      row.bug = name(Bug::TrainModeInference) + ", batch " + std::to_string(b);
      row.correct_label = "eval mode";
      row.buggy_label = "train mode, batch " + std::to_string(b);
      row.correct_accuracy = correct.accuracy;
      row.buggy_accuracy = 100 * evaluate_train_mode(net, d.test, b).accuracy;
      row.detector = "batch_dependence: a test output moves by " + fixed(dep.max_abs_diff, 3) + " (eval mode: " +
                     fixed(dep_eval.max_abs_diff, 7) + "); ModeAudit bn_train_no_grad x" + std::to_string(audit_hits) +
                     " for one prediction";
      row.fires = dep.depends() && audit_hits > 0;
      row.quiet_on_correct = !dep_eval.depends();
      r.rows.push_back(row);
    }
    BugRow row;
    row.bug = name(Bug::TrainModeInference) + ", batch 1";
    row.correct_label = "eval mode";
    row.buggy_label = "refused: " + one_error;
    row.correct_accuracy = correct.accuracy;
    row.buggy_accuracy = std::nan("");
    row.detector = std::string("batch_dependence alone_refused = ") + (dep.alone_refused ? "true" : "false");
    row.fires = dep.alone_refused;
    row.quiet_on_correct = !dep_eval.alone_refused;
    r.rows.push_back(row);
  }
  // 2. train() forgotten after validation.
  {
    BugRow row;
    row.bug = name(Bug::ForgottenTrain);
    row.correct_label = "correct loop";
    row.buggy_label = "eval mode from epoch 2 on";
    row.correct_accuracy = correct.accuracy;
    row.buggy_accuracy = t[1].accuracy;
    row.detector = "ModeAudit step_in_eval x" + std::to_string(t[1].audit.step_in_eval) + ", frozen_running_stats x" +
                   std::to_string(t[1].audit.frozen_running_stats) + " (correct loop: " +
                   std::to_string(correct.audit.issues()) + " issues)";
    row.fires = t[1].audit.step_in_eval > 0;
    row.quiet_on_correct = correct.audit.issues() == 0;
    r.rows.push_back(row);
  }
  // 3. Test data run through train-mode BN (the chapter's validation).
  {
    // One more train-mode test pass on a copy of the correct net: which buffers move?
    const auto before = debug::snapshot_buffers(net);
    net.train();
    {
      NoGradGuard ng;
      net(d.test.slice(0, std::min<std::int64_t>(o.batch, d.test.size())).X);
    }
    const auto changed = debug::buffers_changed(before, net.state_dict());
    debug::restore_buffers(net, before);
    net.eval();
    BugRow row;
    row.bug = name(Bug::TestLeak);
    row.correct_label = "correct loop";
    row.buggy_label = "chapter's loop (eval-mode score; it prints " + fixed(t[2].reported) + "%)";
    row.correct_accuracy = correct.accuracy;
    row.buggy_accuracy = t[2].accuracy;
    row.detector = "buffers_changed lists " + std::to_string(changed.size()) +
                   " buffers after one test batch; ModeAudit bn_train_no_grad x" +
                   std::to_string(t[2].audit.bn_train_no_grad);
    row.fires = !changed.empty() && t[2].audit.bn_train_no_grad > 0;
    row.quiet_on_correct = correct.audit.bn_train_no_grad == 0;
    r.rows.push_back(row);
  }
  // 4. Momentum convention mixed up.
  {
    const auto g_ok = debug::running_stats_gap(*t[3].model.net, x_train_probe);
    const auto g_bad = debug::running_stats_gap(*t[4].model.net, x_train_probe);
    BugRow row;
    row.bug = name(Bug::MomentumMixup);
    row.correct_label = "momentum 0.01";
    row.buggy_label = "momentum 0.99";
    row.correct_accuracy = t[3].accuracy;
    row.buggy_accuracy = t[4].accuracy;
    row.detector = "running_stats_gap: mean gap " + fixed(g_bad.worst_mean_gap(), 2) + " std, |ln var ratio| " +
                   fixed(g_bad.worst_var_log_ratio(), 2) + " (0.01: " + fixed(g_ok.worst_mean_gap(), 2) + ", " +
                   fixed(g_ok.worst_var_log_ratio(), 2) + ")";
    row.fires = g_bad.stale();
    row.quiet_on_correct = !g_ok.stale();
    r.rows.push_back(row);
  }
  // 5. Biased running variance at the small batch.
  {
    const auto g_ok = debug::running_stats_gap(*t[5].model.net, x_train_probe);
    const auto g_bad = debug::running_stats_gap(*t[6].model.net, x_train_probe);
    BugRow row;
    row.bug = name(Bug::BiasedVariance) + ", batch " + std::to_string(o.small_batch);
    row.correct_label = "unbiased (m − 1)";
    row.buggy_label = "biased (m)";
    row.correct_accuracy = t[5].accuracy;
    row.buggy_accuracy = t[6].accuracy;
    row.detector = "running_stats_gap |ln var ratio| " + fixed(g_bad.worst_var_log_ratio(), 2) + " (unbiased: " +
                   fixed(g_ok.worst_var_log_ratio(), 2) + ")";
    row.fires = g_bad.stale();
    row.quiet_on_correct = !g_ok.stale();
    r.rows.push_back(row);
  }
  // 6. Checkpoint without buffers, loaded non-strictly into a fresh model.
  {
    const TempDir dir("norm_study_nobuf_");  // private (kit/temp_dir.h), removed on leaving the block
    const fs::path file = dir / "model.safetensors";
    layers::save(net, file.string(), false);
    ModelConfig mc;
    mc.norm = NormKind::Sync;
    mc.hidden = o.hidden;
    Generator init(o.seed + 999);
    Model fresh = build_model(mc, d.train.num_features(), 10, init);
    std::string strict_error = "strict load accepted";
    try {
      Model probe = build_model(mc, d.train.num_features(), 10, init);
      layers::load(*probe.net, file.string(), true);
    } catch (const std::exception& e) {
      strict_error = e.what();
    }
    const auto lr = layers::load(*fresh.net, file.string(), false);
    const auto report = debug::mode_report(*fresh.net);
    const auto gap = debug::running_stats_gap(*fresh.net, x_train_probe);
    const auto gap_ok = debug::running_stats_gap(net, x_train_probe);
    BugRow row;
    row.bug = name(Bug::CheckpointNoBuffers);
    row.correct_label = "weights + buffers";
    row.buggy_label = "weights only";
    row.correct_accuracy = correct.accuracy;
    row.buggy_accuracy = 100 * evaluate_eval_mode(*fresh.net, d.test).accuracy;
    row.detector = "strict load refuses (" + std::to_string(lr.missing_keys.size()) +
                   " missing keys); mode_report never_updated = " + std::to_string(report.never_updated().size()) +
                   "; running_stats_gap " + fixed(gap.worst_mean_gap(), 2) + " std";
    row.fires = strict_error != "strict load accepted" && !report.never_updated().empty() && gap.stale();
    row.quiet_on_correct = debug::mode_report(net).never_updated().empty() && !gap_ok.stale();
    r.rows.push_back(row);
  }
  // 7. Frozen BN while fine-tuning on shifted inputs.
  {
    const auto sh_train = shifted(d.train, o.seed + 7), sh_test = shifted(d.test, o.seed + 7);
    const auto pre = debug::snapshot_state(net);
    const double before = 100 * evaluate_eval_mode(net, sh_test).accuracy;
    Finetune fz, tr;
    run_jobs(2, o.threads, [&](std::size_t k) {
      (k == 0 ? fz : tr) = finetune(o, d, sh_train, sh_test, pre, k == 0);
    });
    BugRow row;
    row.bug = name(Bug::FrozenFinetune) + " (" + fixed(before) + "% before)";
    row.correct_label = "train-mode BN";
    row.buggy_label = "frozen (eval-mode) BN";
    row.correct_accuracy = tr.accuracy;
    row.buggy_accuracy = fz.accuracy;
    row.detector = "ModeAudit step_in_eval x" + std::to_string(fz.step_in_eval) + " (0 expected with allow_eval = " +
                   "the BN paths: x" + std::to_string(fz.step_in_eval_allowed) + ")";
    row.fires = fz.step_in_eval > 0;
    row.quiet_on_correct = tr.step_in_eval == 0 && fz.step_in_eval_allowed == 0;
    r.rows.push_back(row);
  }
  return r;
}

}  // namespace

void check_bug_options(const BugOptions& o) {
  studies::kit::check_at_least("--epochs", o.epochs, 1);
  studies::kit::check_seeds(o.seed, o.seeds);
  if (o.batch < 2 || o.small_batch < 2)
    throw std::invalid_argument("mode-bugs: expected batches >= 2, got " + std::to_string(o.batch) + " and " +
                                std::to_string(o.small_batch));
  check_sizes(o.train_size, o.test_size);
  check_threads(o.threads);
}

BugResult run_mode_bugs(const BugOptions& o, const StudyData& d) {
  check_bug_options(o);
  const auto t0 = std::chrono::steady_clock::now();
  BugResult r;
  for (int s = 0; s < o.seeds; ++s) {
    BugOptions one = o;
    one.seed = o.seed + static_cast<std::uint64_t>(s);
    const BugResult x = run_one_seed(one, d);
    spdlog::info("mode-bugs seed {}: correct loop {:.2f}%", one.seed, x.baseline_accuracy);
    if (s == 0) {
      r = x;
      for (auto& row : r.rows) row.fires_seeds = row.quiet_seeds = 0;
    }
    r.baseline_by_seed.push_back(x.baseline_accuracy);
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
      auto& row = r.rows[i];
      const auto& xr = x.rows.at(i);
      row.correct_by_seed.push_back(xr.correct_accuracy);
      row.buggy_by_seed.push_back(xr.buggy_accuracy);
      row.fires_seeds += xr.fires;
      row.quiet_seeds += xr.quiet_on_correct;
    }
  }
  for (auto& row : r.rows) {
    row.fires = row.fires_seeds == o.seeds;
    row.quiet_on_correct = row.quiet_seeds == o.seeds;
  }
  r.options = o;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace normstudy
