// mode_bugs: reproduces each module-mode bug on the chapter's regression task (200 train /
// 100 test samples, 50 features, y = sin(2·x0) + cos(x1) + 0.1·noise, net [50,128,64,32,1]
// with BatchNorm, SGD lr 0.01, batch 32), measures its effect and names the detector of
// debug/ that catches it. Prints a Markdown table, then the loss curves of the
// "train() forgotten" run.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#ifdef MODE_BUGS_HAVE_CLI11
#include <CLI/CLI.hpp>
#include "kit/cli.h"
#endif

#include "kit/mode_bug_catalogue.h"
#include "kit/mode_bugs.h"
#include <tapegrad/core/wait_policy.h>

namespace kit = studies::kit;

namespace {

std::string format_double(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string g4(double v) { return format_double("%.4g", v); }
std::string n(std::int64_t v) { return std::to_string(v); }

struct Row {
  std::string bug, symptom, effect, detector;
};

std::string first_sentence(const std::string& s) {
  const auto p = s.find(';');
  return p == std::string::npos ? s : s.substr(0, p);
}

}  // namespace

int main(int argc, char** argv) {
  tapegrad::prefer_passive_wait_policy(argv);  // OpenMP threads sleep, not spin, unless OMP_WAIT_POLICY is set
  std::uint64_t seed = 0;
  int epochs = 40;
  int small_batch_epochs = 10;
#ifdef MODE_BUGS_HAVE_CLI11
  CLI::App app{"Module-mode bugs: reproduce, measure, detect"};
  // CLI11 reads "-1" into an unsigned seed as 2^64 - 1, and 2^64 as 2^64 - 1: refused.
  app.add_option("--seed", seed, "data seed (weights and shuffling use fixed seeds)")->check(kit::non_negative());
  app.add_option("--epochs", epochs, "training epochs at batch 32")->check(CLI::Range(2, 1000));
  app.add_option("--small-batch-epochs", small_batch_epochs, "training epochs at batch 2")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
#else
  (void)argc;
  (void)argv;
#endif
  std::vector<Row> rows;

  const auto inf = kit::measure_train_mode_inference(seed);
  rows.push_back({kit::info(kit::Bug::TrainModeInference).title, kit::info(kit::Bug::TrainModeInference).effect,
                  "max abs change of a prediction (10 test samples x 20 random sets of 31 companions): train mode " +
                      g4(inf.train_dependence) + ", eval mode " + g4(inf.eval_dependence) + "; batch of one: \"" +
                      first_sentence(inf.batch_of_one_error) + "\"",
                  "`batch_dependence` (" + g4(inf.train_dependence) + " vs " + g4(inf.eval_dependence) +
                      "); `ModeAudit` bn_train_no_grad x" + n(inf.audit_bn_train_no_grad) +
                      " for one no-grad prediction"});

  const auto fg = kit::measure_forgotten_train(epochs, seed);
  rows.push_back({kit::info(kit::Bug::ForgottenTrain).title, kit::info(kit::Bug::ForgottenTrain).effect,
                  "running-stat change over epochs 2-" + n(epochs) + ": " + g4(fg.buggy_stats_change) + " (correct loop " +
                      g4(fg.correct_stats_change) + "); final train loss " + g4(fg.buggy.train_loss.back()) + " vs " +
                      g4(fg.correct.train_loss.back()) + "; final eval test MSE " + g4(fg.buggy.eval_loss.back()) +
                      " vs " + g4(fg.correct.eval_loss.back()),
                  "`ModeAudit` step_in_eval x" + n(fg.audit_step_in_eval) + ", frozen_running_stats x" +
                      n(fg.audit_frozen_stats) + " (correct loop: " + n(fg.audit_correct_issues) + " issues)"});

  const auto lk = kit::measure_test_leak(seed);
  rows.push_back({kit::info(kit::Bug::TestLeak).title, kit::info(kit::Bug::TestLeak).effect,
                  "after 1 evaluation: max abs change of running_mean " + g4(lk.mean_change_1) + ", of running_var " +
                      g4(lk.var_change_1) + " (after 10: " + g4(lk.mean_change_10) + ", " + g4(lk.var_change_10) +
                      "); eval test MSE " + g4(lk.eval_before) + " -> " + g4(lk.eval_after_1) + " -> " +
                      g4(lk.eval_after_10) + "; printed (train-mode) test MSE " + g4(lk.reported_loss),
                  "`buffers_changed` lists " + n(static_cast<std::int64_t>(lk.changed_buffers.size())) +
                      " buffers; `ModeAudit` bn_train_no_grad x" + n(lk.audit_bn_train_no_grad) +
                      " (eval-mode evaluation: " + n(lk.audit_correct_issues) + " issues, " +
                      (lk.correct_changed_buffers ? "buffers changed" : "no buffer changed") + ")"});

  const auto mm = kit::measure_momentum_mixup(epochs, seed);
  rows.push_back({kit::info(kit::Bug::MomentumMixup).title, kit::info(kit::Bug::MomentumMixup).effect,
                  "eval test MSE: momentum 0.01 " + g4(mm.eval_intended) + ", 0.99 " + g4(mm.eval_mixed) +
                      ", 0.1 (default) " + g4(mm.eval_default) + "; the weights are identical (max abs difference " +
                      g4(mm.max_weight_diff) + ")",
                  "`running_stats_gap` worst mean gap " + g4(mm.gap_mixed) + " std, worst abs ln var ratio " +
                      g4(mm.var_gap_mixed) + " (0.01: " + g4(mm.gap_intended) + ", " + g4(mm.var_gap_intended) +
                      "; 0.1: " + g4(mm.gap_default) + ", " + g4(mm.var_gap_default) + ")"});

  for (auto [batch, ep] : {std::pair<std::int64_t, int>{32, epochs}, {2, small_batch_epochs}}) {
    const auto bv = kit::measure_biased_variance(batch, ep, seed);
    rows.push_back({kit::info(kit::Bug::BiasedVariance).title + ", batch " + n(batch),
                    kit::info(kit::Bug::BiasedVariance).effect,
                    "running_var biased/unbiased " + g4(bv.var_ratio) + " (m = " + n(batch) + "); eval test MSE " +
                        g4(bv.eval_biased) + " vs " + g4(bv.eval_unbiased) + " (unbiased, PyTorch)",
                    "`running_stats_gap` worst abs ln var ratio " + g4(bv.var_gap_biased) + " vs " +
                        g4(bv.var_gap_unbiased) + " (unbiased)"});
  }

  const auto ck = kit::measure_checkpoint_without_buffers(seed);
  rows.push_back({kit::info(kit::Bug::CheckpointNoBuffers).title +
                      (ck.used_file ? " (safetensors file round trip)" : ""),
                  kit::info(kit::Bug::CheckpointNoBuffers).effect,
                  "max abs eval-output difference from the real model " + g4(ck.max_output_diff) +
                      "; eval test MSE " + g4(ck.eval_loaded) + " vs " + g4(ck.eval_real),
                  std::string(ck.strict_error.empty() ? "" : "strict load refuses it; ") +
                      "non-strict load: missing_keys = " + n(static_cast<std::int64_t>(ck.missing_keys)) +
                      "; `mode_report` never_updated = " + n(static_cast<std::int64_t>(ck.never_updated)) +
                      "; `running_stats_gap` " + g4(ck.gap_loaded) + " std"});

  const auto fz = kit::measure_frozen_finetune(epochs, 20, seed);
  rows.push_back({kit::info(kit::Bug::FrozenFinetune).title, kit::info(kit::Bug::FrozenFinetune).effect,
                  "shifted-domain eval test MSE: before fine-tuning " + g4(fz.eval_before) + ", frozen BN " +
                      g4(fz.eval_frozen) + ", train-mode BN " + g4(fz.eval_train_mode) + " (20 epochs)",
                  "`ModeAudit` step_in_eval x" + n(fz.audit_step_in_eval) + "; with allow_eval = the BN paths x" +
                      n(fz.audit_step_in_eval_allowed) + " (deliberate freezing)"});

  const auto bc = kit::measure_bn_backward_invariants(seed);
  rows.push_back({kit::info(kit::Bug::WrongBackward).title, kit::info(kit::Bug::WrongBackward).effect,
                  "real fused kernel, float64: column-sum residual " + format_double("%.2g", bc.col_sum) +
                      ", dX*xhat residual " + format_double("%.2g", bc.col_dot_xhat),
                  "`bn_backward_invariants` and `gradcheck` flag every mutant"});

  {
    const auto d = kit::make_regression_data(seed);
    const auto y = d.y_test.to_vector();
    double mean = 0, var = 0;
    for (double v : y) mean += v / static_cast<double>(y.size());
    for (double v : y) var += (v - mean) * (v - mean) / static_cast<double>(y.size());
    std::printf("Test MSE of predicting the test mean (variance of y_test): %.4g\n\n", var);
  }
  std::printf("| bug | symptom | measured effect | detector that fires |\n|---|---|---|---|\n");
  for (auto& r : rows)
    std::printf("| %s | %s | %s | %s |\n", r.bug.c_str(), r.symptom.c_str(), r.effect.c_str(), r.detector.c_str());

  std::printf("\nLoss curves, correct loop vs train() forgotten after validation (eval-mode test MSE):\n");
  std::printf("| epoch | train loss (correct) | train loss (forgotten) | eval test MSE (correct) | eval test MSE (forgotten) |\n");
  std::printf("|---|---|---|---|---|\n");
  for (std::size_t e = 0; e < fg.correct.train_loss.size(); ++e)
    if (e == 0 || (e + 1) % 5 == 0)
      std::printf("| %zu | %.4f | %.4f | %.4f | %.4f |\n", e + 1, fg.correct.train_loss[e], fg.buggy.train_loss[e],
                  fg.correct.eval_loss[e], fg.buggy.eval_loss[e]);
  return 0;
}
