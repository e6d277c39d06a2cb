#pragma once
// `claims lr-sweep`: "BN allows larger learning rates" (Bjorck, Gomes, Selman & Weinberger
// 2018). The Fashion-MNIST MLP 784-256-128-10 with BatchNorm (Linear -> BN -> ReLU) or
// without (Linear -> ReLU), plain SGD (no momentum), lr from lr_min up in steps of √10 to
// lr_max; a run diverges when a minibatch loss is NaN, Inf or above 10× its first minibatch
// loss. Per net and seed: the first diverging rate, the stable range in decades
// (log10 of the largest rate below it over lr_min, plus ½ step: the rates are √10 apart),
// the eval-mode test accuracy at every rate and the best one.
#include <cstdint>
#include <string>
#include <vector>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"

namespace claims {

struct SweepOptions : studies::kit::FashionGridOptions {
  double lr_min = 1e-4, lr_max = 1e3;
  int epochs = 2;
  std::int64_t batch = 64;
  std::vector<std::int64_t> hidden = {256, 128};
  /// "mlp" or "cnn" (normstudy's CNN: [Conv2d 3×3 -> norm -> ReLU -> MaxPool 2] × (8, 16)
  /// -> Linear(784, 64) -> norm -> ReLU -> Linear(64, 10), the block of models::CNN).
  std::string arch = "mlp";
};
SweepOptions quick_sweep_options(SweepOptions o);
/// Throws std::invalid_argument naming the option.
void check_sweep_options(const SweepOptions& o);
/// lr_min·√10^k for k = 0, 1, ... while <= lr_max (within rounding).
std::vector<double> sweep_rates(const SweepOptions& o);

struct SweepRun : studies::kit::BnVsPlainRun {
  double lr = 0;
  bool diverged = false;
  std::string reason;      ///< e.g. "loss 812 > 10x the first (2.31) at step 17"
  double first_loss = 0, last_loss = 0;  ///< first minibatch loss, mean of the last epoch's losses
  double test_acc = 0;     ///< eval mode; NaN when diverged
};
/// runs: net (plain, bn), seed, rate.
struct SweepResult : studies::kit::GridResult<SweepOptions, SweepRun> {
  std::vector<double> rates;
};

SweepResult run_lr_sweep(const SweepOptions& o, const studies::kit::StudyData& d);
std::string sweep_csv(const SweepResult& r);
std::string sweep_summary(const SweepResult& r);
std::vector<std::string> write_sweep(const SweepResult& r, const std::string& dir);

}  // namespace claims
