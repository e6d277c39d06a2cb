#pragma once
// The running-statistics step of the per-channel norms, written once: BatchNorm,
// BatchRenorm, InstanceNorm (track_running_stats) and SyncBatchNorm all take their factor,
// refuse a batch with one value per channel and update their buffers here (PyTorch's rule,
// torch.nn.modules.batchnorm._BatchNorm.forward and aten's batch_norm_cpu_update_stats).
#include <cstdint>
#include <optional>
#include <string>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// A module's running statistics and the rule that moves them after a batch whose
/// per-channel mean and biased variance σ² = Σ(x − mean)²/m were taken over m values:
///   f = momentum, or 1/(num_batches_tracked + 1) when momentum is nullopt (the cumulative
///       average; num_batches_tracked undefined counts as 0, so f = 1);
///   running_mean ← (1 − f)·running_mean + f·mean
///   running_var  ← (1 − f)·running_var  + f·σ²·m/(m − 1)   (unbiased_var; false: f·σ²,
///                  as some frameworks and many hand-written layers do)
///   num_batches_tracked ← num_batches_tracked + 1   (when defined)
/// The arithmetic is in double, rounded once to the buffers' dtype. An empty RunningStats
/// (running_mean undefined) means "no running statistics": nothing is updated.
struct RunningStats {
  Tensor running_mean;                   ///< (C), the input's dtype; given with running_var or not at all
  Tensor running_var;                    ///< (C), the input's dtype; given with running_mean or not at all
  Tensor num_batches_tracked;            ///< int64 scalar, or undefined (never incremented)
  std::optional<double> momentum = 0.1;  ///< PyTorch convention, in [0, 1]; nullopt: cumulative
  bool unbiased_var = true;              ///< running_var takes σ²·m/(m − 1) (PyTorch) or σ²
  /// The owning module's flag "never_updated_stats reported" (check_mode sets it, so each
  /// module reports once); null: reported at every such forward.
  bool* never_updated_reported = nullptr;

  /// Whether there are running statistics (running_mean defined).
  bool defined() const { return running_mean.defined(); }
  /// The factor f above.
  double factor() const;
  /// Throws std::invalid_argument prefixed with `who`: momentum, when set, outside [0, 1];
  /// one of running_mean / running_var given without the other; either not of shape (C)
  /// (C = x.size(1)) or not of x's dtype; num_batches_tracked not an int64 scalar.
  void check(const std::string& who, const Tensor& x) const;
  /// Applies the update to the buffers in place (bumping their version, so a graph that
  /// saved them notices) for batch statistics mean, biased_var (C values each) of `count`
  /// values per channel. count >= 2: callers refuse smaller counts first with
  /// check_values_per_channel, before any buffer changes.
  void update(const double* mean, const double* biased_var, std::int64_t count) const;
  /// The mode checks of core/mode_checks.h, run by the batch norms (and a tracked
  /// InstanceNorm in train mode) before update (nothing changes when one throws); `who`
  /// names the module ("BatchNorm1d", shown with C as "BatchNorm1d(64)"). use_batch_stats (train mode) under no-grad: bn_train_no_grad. Eval
  /// mode with num_batches_tracked defined and 0, running_mean all 0 and running_var all 1:
  /// never_updated_stats. Nothing without running statistics or with the checks off; Throw
  /// mode: std::logic_error with the warning's text.
  /// Also throws a pending bn_train_no_backward error (throw_pending_mode_issue) first.
  void check_mode(const std::string& who, bool use_batch_stats) const;
  /// The bn_train_no_backward check: marks `out` (the train-mode forward's recorded output)
  /// so that freeing its graph without a backward is reported (autograd::watch_train_forward).
  /// Nothing without running statistics, under no-grad, with the checks off or paused, or
  /// when `out` was not recorded.
  void watch_backward(const std::string& who, const Tensor& out) const;
};

/// Throws std::invalid_argument (prefixed with `who`) unless momentum is in [0, 1], naming
/// the value and the Keras-decay conversion.
void check_momentum(const std::string& who, double momentum);

/// The refusal of batch statistics over one value (PyTorch: "Expected more than 1 value per
/// channel when training"): a variance of one value is 0 and its unbiased form divides by
/// 0. Throws std::invalid_argument when count <= 1:
///   "<who>: expected more than 1 <what> when training, got <got>; call eval() …"
/// with running statistics, or, without them, saying that eval() normalises with batch
/// statistics too. what: "value per channel" (the batch norms), "spatial element per
/// instance" (InstanceNorm); got: what was seen, e.g. "input of shape [1, 3]". Callers run
/// it before any buffer changes.
void check_values_per_channel(const std::string& who, std::int64_t count, const std::string& what,
                              const std::string& got, bool has_running_stats);

}  // namespace tapegrad::layers::functional
