#pragma once
// Batch normalisation modules (Ioffe & Szegedy 2015), PyTorch semantics.
#include <optional>
#include <utility>

#include <tapegrad/layers/channel_norm.h>
#include <tapegrad/layers/functional/running_stats.h>

namespace tapegrad::layers {

/// Keras / textbook decay α (run = α·run + (1-α)·batch) to PyTorch momentum (1 - α):
/// decay 0.99 is momentum 0.01. Throws std::invalid_argument outside [0, 1].
double momentum_from_decay(double decay);
/// PyTorch momentum to Keras / textbook decay (1 - momentum).
double decay_from_momentum(double momentum);

/// Options shared by the batch-norm family. Defaults are PyTorch's. Checked at
/// construction and again, once, at every forward (the field is public; the forward's
/// check is functional::batch_norm's): eps finite and >= 0, momentum in [0, 1];
/// std::invalid_argument names the value otherwise. momentum and unbiased_running_var go
/// to functional::RunningStats (layers/functional/running_stats.h), which updates the
/// running statistics.
struct BatchNormOptions {
  double eps = 1e-5;                     ///< added to the variance inside the sqrt
  std::optional<double> momentum = 0.1;  ///< PyTorch convention; nullopt = cumulative average
  bool affine = true;                    ///< learnable weight γ (init 1) and bias β (init 0)
  bool track_running_stats = true;       ///< keep running_mean (0), running_var (1), num_batches_tracked (0)
  /// running_var takes the unbiased batch variance Σ(x-μ)²/(m-1) (PyTorch); false: the
  /// biased Σ(x-μ)²/m, as some frameworks and many hand-written layers do. The forward
  /// always normalises with the biased variance.
  bool unbiased_running_var = true;
  /// dtype of the parameters and buffers (float32 or float64); Module::to changes it later.
  Dtype dtype = Dtype::Float32;
};

/// Throws std::invalid_argument (prefixed with `who`) unless eps is finite and >= 0 and
/// momentum, when set, is in [0, 1].
void check_batch_norm_options(const std::string& who, const BatchNormOptions& opts);

/// Common implementation: statistics per channel (dim 1) over N and every dim after C.
///
/// Train mode: normalises with the batch mean and biased variance (divide by m), then
/// updates the running statistics as functional::RunningStats documents (factor momentum,
/// or 1/(num_batches_tracked + 1) when momentum is nullopt; running_var from the unbiased
/// batch variance unless unbiased_running_var = false; num_batches_tracked += 1, saturating at INT64_MAX). A batch
/// with one value per channel (m = 1) throws std::invalid_argument and leaves every buffer
/// unchanged.
/// Eval mode: normalises with running_mean / running_var, so a sample's output does not
/// depend on the other samples of its batch. With track_running_stats = false there are
/// no buffers and batch statistics are used in both modes (so a batch with one value per
/// channel throws in eval mode too, saying the module has no running statistics).
/// Buffers are never touched by an optimizer: only this forward updates them.
/// The forward is one call of functional::batch_norm with running_stats().
class BatchNormBase : public ChannelNormBase {
 public:
  /// Registers the parameters and buffers for `num_features` channels C (ChannelNormBase).
  /// Throws std::invalid_argument for num_features < 1 or invalid options.
  BatchNormBase(std::int64_t num_features, BatchNormOptions options);
  Tensor forward(const Tensor& x) override;
  /// forward(x) followed by relu and, with `clip` = (lo, hi), lo <= 0 <= hi, by clamp(lo, hi),
  /// as one op (functional::batch_norm_relu: the same bits as the layers run apart). What
  /// the fused BatchNorm1dReLU (layers/batch_norm_relu.h) runs; throws what forward throws.
  Tensor forward_relu(const Tensor& x, std::optional<std::pair<double, double>> clip);
  std::string extra_repr() const override;
  /// How many train-mode batches have updated the running statistics.
  std::int64_t batches_tracked() const;

  /// C, the number of channels (features) normalised.
  std::int64_t num_features;
  /// The options; public, so checked again at every forward.
  BatchNormOptions options;
  // weight, bias, running_mean, running_var, num_batches_tracked, reset_running_stats():
  // ChannelNormBase.

 protected:
  /// Tag of the constructors that share another module's state (share_norm_state).
  struct ShareState {};
  /// A BatchNorm with `src`'s num_features and options whose parameters and buffers are
  /// `src`'s tensors (the same handles); its mode is src's.
  BatchNormBase(const BatchNormBase& src, ShareState);
  /// Throws std::invalid_argument naming the expected and actual shape.
  virtual void check_input(const Tensor& x) const = 0;
  /// Throws std::invalid_argument unless x.size(1) == num_features, naming both.
  void check_features(const Tensor& x) const;
  /// Throws std::invalid_argument unless x has the dtype of the module's parameters and
  /// buffers (which Module::to changes).
  void check_dtype(const Tensor& x) const;
  /// The module's running statistics and their update rule (empty without
  /// track_running_stats): what functional::batch_norm updates in train mode.
  functional::RunningStats running_stats() const;

 private:
  mutable bool never_updated_reported_ = false;  // RunningStats::never_updated_reported
};

/// BatchNorm over (N, C) or (N, C, L): statistics per feature over N (and L).
class BatchNorm1d : public BatchNormBase {
 public:
  /// BatchNorm1d over `num_features` features C; see BatchNormBase for what throws.
  explicit BatchNorm1d(std::int64_t num_features, BatchNormOptions options = {})
      : BatchNormBase(num_features, options) {}
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  /// Shares `src`'s parameters and buffers (BatchNormBase's ShareState constructor).
  BatchNorm1d(const BatchNorm1d& src, ShareState s) : BatchNormBase(src, s) {}
  void check_input(const Tensor& x) const override;
};

/// BatchNorm over (N, C, H, W): statistics per channel over N, H and W.
class BatchNorm2d : public BatchNormBase {
 public:
  /// BatchNorm2d over `num_features` channels C; see BatchNormBase for what throws.
  explicit BatchNorm2d(std::int64_t num_features, BatchNormOptions options = {})
      : BatchNormBase(num_features, options) {}
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& x) const override;
};

}  // namespace tapegrad::layers
