#pragma once
// Functional batch normalisation (Ioffe & Szegedy 2015, Algorithm 1), PyTorch's
// F.batch_norm, and the entry points the batch-norm modules run through: with a module's
// RunningStats (running_stats.h), and with batch statistics computed elsewhere
// (SyncBatchNorm's, over every rank).
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/running_stats.h>

namespace tapegrad::layers::functional {

/// Normalises x of shape (N, C), (N, C, L) or (N, C, H, W) (any rank >= 2) per channel c,
/// over N and every dimension after C (m = N·L or N·H·W values per channel).
///
/// training = true: uses the batch mean μ and biased variance σ² = Σ(x-μ)²/m, and, when
///   running_mean / running_var are defined, updates them in place:
///   run = (1 - momentum)·run + momentum·batch, with the unbiased variance σ²·m/(m-1)
///   (unbiased_running_var = false: the biased σ², as some frameworks and many hand-written
///   layers do).
///   Throws std::invalid_argument when m = 1 (one value per channel), before any change.
///   A channel with σ² + eps = 0 (constant, eps = 0) gets rstd = 0: output β, zero gradient,
///   as PyTorch.
/// training = false: uses running_mean / running_var (both required).
/// y = (x - μ)/sqrt(σ² + eps)·weight + bias; weight and bias (C) may be undefined (= 1, 0).
///
/// Backward (fused, one reduction pass and one element-wise pass), with x̂ = (x-μ)/σ and
/// dx̂ = γ·dy:  dx = (dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)) / sqrt(σ² + eps)   (train)
///             dx = γ·dy / sqrt(running_var + eps)                     (eval)
///             dγ = Σ dy·x̂,  dβ = Σ dy.
/// Throws std::invalid_argument naming the shapes when C or a dtype does not match.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                  bool unbiased_running_var = true);

/// The same with a module's running statistics (the entry point of BatchNorm, BatchRenorm
/// and SyncBatchNorm's eval mode): use_batch_stats = true normalises with the batch
/// statistics and, when `running` is defined, updates it (RunningStats::update, including
/// num_batches_tracked and the cumulative average for momentum nullopt); false normalises
/// with running (required). Every argument is checked here, once per call, and errors are
/// prefixed with `who` (the module's name): eps, the RunningStats (RunningStats::check),
/// weight / bias, and one value per channel with batch statistics
/// (check_values_per_channel), all before any buffer changes.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                  bool use_batch_stats, double eps, const std::string& who = "batch_norm");

/// batch_norm(x, weight, bias, running, use_batch_stats, eps, who) followed by relu and, when
/// `clip` = (lo, hi) is given (lo <= 0 <= hi), by clamp(lo, hi): one op and one tape node
/// (named "batch_norm_relu") with the bits of the two or three ops run apart, forward and
/// backward (the activations through relu / relu_clamp, whose masks the backward applies
/// before batch_norm's own backward). layers::Sequential runs BatchNorm1d -> ReLU [-> Clamp]
/// through it. Throws what batch_norm throws, and std::invalid_argument for a clip outside
/// lo <= 0 <= hi.
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                       bool use_batch_stats, double eps, const std::string& who,
                       std::optional<std::pair<double, double>> clip);

/// Batch statistics taken elsewhere, for batch_norm_with_stats: the per-channel mean and
/// biased variance (float64, shape (C)) of `count` values per channel, e.g. over every
/// rank's batch (SyncBatchNorm).
struct BatchStats {
  Tensor mean;              ///< (C) float64: the per-channel mean over the whole batch
  Tensor var;               ///< (C) float64: the per-channel biased variance Σ(x − mean)²/count
  std::int64_t count = 0;   ///< values per channel behind mean and var (N·L or N·H·W summed over ranks)
  std::string origin;  ///< where they were taken, for messages ("over all 4 ranks": "expected more than 1 value per channel over all 4 ranks")
  /// Called in the backward, before dx, on the 2C float64 sums Σdy (C values) then
  /// Σdy·(x − mean) (C values) of this input, to turn them into those of the whole batch
  /// (SyncBatchNorm: an allreduce). Unset: they are already.
  std::function<void(double* sums, std::int64_t n)> reduce_grad_sums;
  /// For a create_graph backward: the sum over the whole batch (SyncBatchNorm: over ranks) of
  /// a per-channel (C) tensor of this input's sums, itself differentiable (the all-reduce of a
  /// sum is its own adjoint). Set: the double backward recomputes the statistics of the whole
  /// batch from x through it; unset: a create_graph backward throws std::logic_error naming
  /// `who` (the statistics came from outside the input).
  std::function<Tensor(const Tensor& per_channel)> sum_over_batch;
};

/// Train-mode batch_norm of x (N, C, *) with the given batch statistics instead of x's own:
/// y = (x − mean)·rstd·γ + β with rstd = 1/sqrt(var + eps) (0 where var + eps = 0, as
/// batch_norm); `running` (when defined) is updated from them as batch_norm does, with m =
/// stats.count. Backward: batch_norm's, with m = stats.count and the sums passed through
/// stats.reduce_grad_sums; dγ = Σ dy·x̂ and dβ = Σ dy are this input's own (before the
/// reduction). A create_graph backward needs stats.sum_over_batch (else std::logic_error).
/// x may have no rows (N = 0) when count > 1: the output is empty, the
/// backward still calls reduce_grad_sums (a collective every rank must join).
/// Throws std::invalid_argument (prefixed `who`) for stats.count <= 1, statistics not
/// float64 of shape (C), and as batch_norm, before any buffer changes.
Tensor batch_norm_with_stats(const Tensor& x, const BatchStats& stats, const Tensor& weight, const Tensor& bias,
                             const RunningStats& running, double eps, const std::string& who = "batch_norm_with_stats");

/// Per-channel batch statistics of x viewed as (N, C, S): mean and biased variance
/// (float64, shape (C)). Used by BatchRenorm and the diagnostics.
void batch_moments(const Tensor& x, Tensor& mean, Tensor& biased_var);

}  // namespace tapegrad::layers::functional
