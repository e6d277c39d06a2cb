#pragma once
// `claims variance-shift`: Li, Chen, Hu & Yang 2019 (CVPR), "Understanding the disharmony
// between Dropout and Batch Normalization by variance shift". Dropout(p) with keep ratio
// q = 1 − p scales the variance a following BatchNorm sees in training: for an input with
// per-channel mean μ and variance σ², Var_train = (σ² + μ²)/q − μ², so running_var / real_var
// = 1/q + (μ²/σ²)(1/q − 1), 1/q for zero-mean inputs (their Eq. 4 and §3). real_var is the
// variance the layer sees in eval mode on the training data.
//
// Fashion-MNIST MLP 784 -> [Linear -> BN -> ReLU] per hidden width -> Linear(10), with
//   before: Dropout(p) directly before every BN (Linear -> Dropout -> BN -> ReLU);
//   after:  Dropout(p) after the last BN's ReLU, before the classifier (no BN downstream).
// After training, per BN layer: the paper's max(real_var/running_var, running_var/real_var)
// (mean over channels), the zero-mean prediction 1/q and the prediction with the measured
// mean, then eval-mode train/test accuracy before and after debug::recalibrate_batch_norm.
#include <cstdint>
#include <string>
#include <vector>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"

namespace claims {

struct ShiftOptions : studies::kit::FashionGridOptions {
  std::vector<double> ps = {0.1, 0.3, 0.5};  ///< Dropout drop probabilities (PyTorch's p)
  int epochs = 5;
  std::int64_t batch = 64;
  double lr = 0.05;                           ///< SGD, momentum 0.9
  double bn_momentum = 0.1;
  std::vector<std::int64_t> hidden = {256, 128};
};
/// --quick: 2 seeds, 1 epoch, 2,048 / 2,000 images.
ShiftOptions quick_shift_options(ShiftOptions o);
/// Throws std::invalid_argument naming the option: p in (0, 1), seeds, epochs >= 1,
/// batch in 2..train size, lr finite > 0, BN momentum in (0, 1], sizes, threads.
void check_shift_options(const ShiftOptions& o);

struct LayerShift {
  std::string module;
  double ratio = 0;            ///< mean over channels of max(real/running, running/real)
  double running_over_real = 0;  ///< mean over channels of running_var / real_var
  double predicted_zero_mean = 0;  ///< 1/q (before), 1 (after)
  double predicted = 0;        ///< mean over channels of 1/q + (μ²/σ²)(1/q − 1) (before), 1 (after)
  double mean_sq_over_var = 0;  ///< mean over channels of μ²/σ² of the eval-mode input
  /// Channels whose eval-mode input is nearly zero-mean (μ²/σ² < 0.05), where the zero-mean
  /// prediction applies: their count and their mean ratio (NaN when there are none).
  int near_zero_channels = 0;
  double near_zero_ratio = 0;
};
struct ShiftRun {
  std::string placement;  ///< "before" or "after"
  double p = 0;
  std::uint64_t seed = 0;
  bool crashed = false;
  std::vector<LayerShift> layers;
  double train_acc = 0, test_acc = 0;              ///< eval mode, running statistics from training
  double train_acc_recal = 0, test_acc_recal = 0;  ///< after recalibrate_batch_norm
};
/// runs: p-major, then placement (before, after), then seed.
using ShiftResult = studies::kit::GridResult<ShiftOptions, ShiftRun>;

ShiftResult run_variance_shift(const ShiftOptions& o, const studies::kit::StudyData& d);
std::string shift_csv(const ShiftResult& r);
std::string shift_summary(const ShiftResult& r);
/// results.csv, summary.md, variance_shift.png; returns the figures written.
std::vector<std::string> write_shift(const ShiftResult& r, const std::string& dir);

}  // namespace claims
