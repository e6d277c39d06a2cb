#pragma once
// `claims lr-sweep-linear`: "BN allows larger learning rates" on Santurkar et al.'s deep linear
// network (deep_linear.h): full-batch GD for `steps` steps at lr from lr_min up in √10 steps,
// BN vs plain; a run diverges when the loss is NaN, Inf, above 1e10, or above 10× its initial
// value at any recorded step. Per net and seed: the first diverging rate and the stable range
// in decades; per rate the final loss, paired BN / plain.
#include <string>
#include <vector>

#include "deep_linear.h"
#include "kit/training_options.h"

namespace claims {

struct LinearSweepOptions {
  LinearOptions linear;  ///< depth, width, samples, seeds, threads; lr is swept, steps below
  int steps = 1000;
  double lr_min = 1e-7, lr_max = 1e-3;
};
/// --quick: 2 seeds, 100 steps, lr 1e-7 .. 1e-5.
LinearSweepOptions quick_linear_sweep_options(LinearSweepOptions o);
/// Throws std::invalid_argument naming the option.
void check_linear_sweep_options(const LinearSweepOptions& o);

struct LinearSweepRun : studies::kit::BnVsPlainRun {
  double lr = 0;
  bool diverged = false;
  double first_loss = 0, final_loss = 0;  ///< final: NaN when diverged
};
struct LinearSweepResult : studies::kit::GridResult<LinearSweepOptions, LinearSweepRun> {
  std::vector<double> rates;
};
LinearSweepResult run_linear_lr_sweep(const LinearSweepOptions& o);
std::string linear_sweep_csv(const LinearSweepResult& r);
std::string linear_sweep_summary(const LinearSweepResult& r);
/// results.csv and summary.md (no figure: the table is the result).
void write_linear_sweep(const LinearSweepResult& r, const std::string& dir);

}  // namespace claims
