// The measurements behind studies/mode_bugs: each bug is reproduced on the chapter's
// regression task and its effect has the direction and size the bug implies.
#include <catch2/catch.hpp>

#include <cmath>

#include <tapegrad/debug/diagnostics.h>
#include "kit/mode_bugs.h"
#include <tapegrad/layers/batch_norm.h>

using namespace tapegrad;
using namespace tapegrad::debug;
namespace kit = studies::kit;

TEST_CASE("the chapter's regression data and net", "[debug]") {
  const auto d = kit::make_regression_data(0);
  REQUIRE(d.x_train.shape() == Shape{200, 50});
  REQUIRE(d.y_train.shape() == Shape{200, 1});
  REQUIRE(d.x_test.shape() == Shape{100, 50});
  // y = sin(2·x0) + cos(x1) + 0.1·noise: the residual is small
  const auto x = d.x_train.to_vector(), y = d.y_train.to_vector();
  double max_res = 0;
  for (int i = 0; i < 200; ++i) max_res = std::max(max_res, std::fabs(y[i] - std::sin(2 * x[i * 50]) - std::cos(x[i * 50 + 1])));
  REQUIRE(max_res > 0.05);
  REQUIRE(max_res < 0.6);  // 0.1·|N(0,1)| over 200 draws
  auto net = kit::make_net();
  REQUIRE(kit::batch_norm_paths(*net) == std::vector<std::string>{"1", "4", "7"});
  REQUIRE(net->size() == 10);
}

TEST_CASE("inference in train mode: predictions depend on companions, a batch of one is refused", "[debug]") {
  const auto r = kit::measure_train_mode_inference(0);
  CAPTURE(r.train_dependence, r.eval_dependence);
  REQUIRE(r.train_dependence > 1e-2);
  REQUIRE(r.eval_dependence < 1e-5);
  REQUIRE_THAT(r.batch_of_one_error, Catch::Contains("more than 1 value per channel"));
  REQUIRE(r.audit_bn_train_no_grad == 3);  // one finding per BatchNorm
}

TEST_CASE("train() forgotten after validation: running stats frozen, the audit fires", "[debug]") {
  const auto r = kit::measure_forgotten_train(8, 0);
  REQUIRE(r.buggy.train_loss.size() == 8);
  REQUIRE(r.buggy.train_loss[0] == r.correct.train_loss[0]);  // the same first epoch
  REQUIRE(r.buggy.train_loss[7] != r.correct.train_loss[7]);
  REQUIRE(r.buggy_stats_change == 0.0);
  REQUIRE(r.correct_stats_change > 1e-2);
  REQUIRE(r.audit_step_in_eval == 7 * 7);  // 7 steps per epoch in epochs 2-8
  REQUIRE(r.audit_frozen_stats > 0);
  REQUIRE(r.audit_correct_issues == 0);
}

TEST_CASE("test data evaluated in train mode leaks into the running stats", "[debug]") {
  const auto r = kit::measure_test_leak(0);
  REQUIRE(r.changed_buffers.size() == 9);  // 3 BatchNorms x (mean, var, count)
  REQUIRE(r.mean_change_1 > 1e-3);
  REQUIRE(r.var_change_1 > 1e-3);
  REQUIRE(r.mean_change_10 > r.mean_change_1);
  REQUIRE(r.eval_after_1 != r.eval_before);
  REQUIRE(r.reported_loss != r.eval_before);
  REQUIRE(r.audit_bn_train_no_grad == 30);  // 10 evaluations x 3 BatchNorms
  REQUIRE(r.audit_correct_issues == 0);
  REQUIRE(!r.correct_changed_buffers);
}

TEST_CASE("momentum 0.99 where 0.01 was meant: same weights, stale running stats", "[debug]") {
  const auto r = kit::measure_momentum_mixup(10, 0);
  REQUIRE(r.max_weight_diff == 0.0);  // momentum never touches training
  CAPTURE(r.gap_mixed, r.gap_default, r.var_gap_mixed, r.var_gap_default);
  REQUIRE(r.gap_mixed > 2 * r.gap_default);
  REQUIRE(r.var_gap_mixed > 2 * r.var_gap_default);
  REQUIRE(r.eval_mixed != r.eval_intended);
}

TEST_CASE("biased running variance: ratio (m-1)/m at batch 2", "[debug]") {
  const auto b2 = kit::measure_biased_variance(2, 3, 0);
  REQUIRE(b2.var_ratio == Approx(0.5).epsilon(1e-3));  // every batch has m = 2: factor 1/2
  REQUIRE(b2.eval_biased != b2.eval_unbiased);
  const auto b32 = kit::measure_biased_variance(32, 10, 0);
  // batches of 32 and a last batch of 8 per epoch: between 7/8 and 31/32
  REQUIRE(b32.var_ratio > 0.875);
  REQUIRE(b32.var_ratio < 31.0 / 32.0 + 1e-9);
}

TEST_CASE("checkpoint without buffers: missing keys reported, stats at init, outputs differ", "[debug]") {
  const auto r = kit::measure_checkpoint_without_buffers(0);
  REQUIRE(r.missing_keys == 9);
  REQUIRE(r.missing[0] == "1.running_mean");
  REQUIRE(r.used_file);
  REQUIRE_THAT(r.strict_error, Catch::Contains("Missing keys") && Catch::Contains("7.num_batches_tracked"));
  REQUIRE(r.never_updated == 3);
  REQUIRE(r.max_output_diff > 1e-1);
  REQUIRE(r.gap_loaded > 0.5);
}

TEST_CASE("frozen BN fine-tuning: the audit fires unless the freezing is declared", "[debug]") {
  const auto r = kit::measure_frozen_finetune(5, 3, 0);
  REQUIRE(r.audit_step_in_eval == 3 * 7);
  REQUIRE(r.audit_step_in_eval_allowed == 0);
  REQUIRE(r.eval_frozen != r.eval_train_mode);
  REQUIRE(std::isfinite(r.eval_before));
}

TEST_CASE("the chapter's backward checks pass on the real fused kernel", "[debug]") {
  const auto c = kit::measure_bn_backward_invariants(0);
  INFO(c.to_string());
  REQUIRE(c.col_sum < 1e-12);
  REQUIRE(c.col_dot_xhat < 1e-12);
}
