#pragma once
// running_stats_gap: do a model's BatchNorm running statistics describe its data?
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/layers/module.h>

namespace tapegrad::debug {

/// One tracked BatchNorm: its running statistics against the statistics of its input
/// when the whole of x goes through the model in train mode.
struct StatsGap {
  std::string module;  ///< dotted path
  std::string type;    ///< type_name(), e.g. "BatchNorm2d"
  /// max over channels c of |running_mean[c] - μ[c]| / sqrt(σ²[c] + eps): how far the
  /// running mean is off, in units of the data's standard deviation.
  double max_mean_gap = 0;
  /// max over channels of |ln((running_var[c] + eps) / (σ²[c] + eps))|: 0.69 means a factor 2.
  double max_var_log_ratio = 0;
  ///@{
  /// The channels where max_mean_gap and max_var_log_ratio occur (-1: none).
  std::int64_t worst_mean_channel = -1, worst_var_channel = -1;
  ///@}
};

/// What running_stats_gap() found, one entry per tracked BatchNorm.
struct StatsGapReport {
  std::vector<StatsGap> modules;  ///< in Module::named_modules order
  /// Largest max_mean_gap over the modules (NaN entries skipped; 0 for none).
  double worst_mean_gap() const;
  /// Largest max_var_log_ratio over the modules (NaN entries skipped; 0 for none).
  double worst_var_log_ratio() const;
  /// Some module exceeds a tolerance. Defaults: 0.5 std for the mean, ln 1.65 (0.5) for the
  /// variance; a correctly trained model (momentum 0.1, batch 32) stays well below.
  bool stale(double mean_tol = 0.5, double var_log_tol = 0.5) const;
  /// One line per module: path, type, both gaps and their channels.
  std::string to_string() const;
};

/// Runs x (N, ...) once through `model` in train mode, recording the input of every
/// BatchNorm that tracks running statistics, and compares each one's running_mean /
/// running_var with the per-channel mean and unbiased variance of that input (over N
/// and every dim after C). Catches the stale-statistics bugs: momentum mixed up (0.99 for
/// 0.01), biased running variance at small batches, train() forgotten (frozen stats),
/// checkpoints loaded without buffers (init values 0 / 1).
/// Side effects: none. Modes of every module and every buffer are saved and restored; the
/// forward runs under NoGradGuard and AuditPause (a Dropout is active in it, as in training,
/// and draws from its generator). Needs N >= 2; rethrows model errors.
StatsGapReport running_stats_gap(layers::Module& model, const Tensor& x);

}  // namespace tapegrad::debug
