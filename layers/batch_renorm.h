#pragma once
// Batch renormalisation (Ioffe 2017, "Batch Renormalization: Towards Reducing
// Minibatch Dependence in Batch-Normalized Models", Algorithm 1).
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/functional/batch_renorm.h>

namespace tapegrad::layers {

/// Train mode (with track_running_stats), per channel c over N (and L or H, W):
///   μ_B, σ_B = sqrt(σ²_B + eps)   batch mean and biased std, as in BatchNorm
///   σ_run = sqrt(running_var + eps)
///   r = clip(σ_B / σ_run, 1/rmax, rmax)
///   d = clip((μ_B - running_mean) / σ_run, -dmax, dmax)
///   y = γ·(x̂·r + d) + β,  x̂ = (x - μ_B)/σ_B
/// r and d are computed from the running statistics before this batch updates them and
/// are constants for the backward (the paper's stop_gradient), so the backward is
/// BatchNorm's fused one with γ' = γ·r, β' = γ·d + β:
///   term 1 (direct):        dx̂ = γ·r·dy
///   term 2 (through μ_B):  -mean(dx̂)
///   term 3 (through σ_B):  -x̂·mean(dx̂·x̂)
///   dx = (term 1 + term 2 + term 3)/σ_B,  dγ = Σ dy·(x̂·r + d),  dβ = Σ dy.
/// Then the running statistics are updated exactly as BatchNorm's (PyTorch convention:
/// running_var takes the unbiased batch variance; num_batches_tracked += 1), so eval
/// mode is BatchNorm's eval mode: y = γ·(x - running_mean)/σ_run + β.
/// rmax = 1, dmax = 0 gives BatchNorm exactly. The paper starts there and relaxes to
/// rmax = 3, dmax = 5; set_clipping() may be called at any time (e.g. every step).
/// Without track_running_stats there is nothing to renormalise against and the layer is
/// BatchNorm. Defaults: BatchNormOptions' (eps 1e-5, momentum 0.1, affine, tracked),
/// rmax 3, dmax 5. Throws std::invalid_argument for rmax < 1 or dmax < 0 (naming the
/// value), and as BatchNorm does for bad shapes or one value per channel in training.
/// BN is BatchNorm1d or BatchNorm2d (the two instantiations in batch_renorm.cpp); use
/// BatchRenorm1d / BatchRenorm2d.
template <class BN>
class BatchRenorm : public BN {
 public:
  /// BatchRenorm over `num_features` channels C with the clipping bounds `rmax` (>= 1) and
  /// `dmax` (>= 0); throws std::invalid_argument otherwise, or for invalid options.
  explicit BatchRenorm(std::int64_t num_features, BatchNormOptions options = {}, double rmax = 3.0,
                       double dmax = 5.0);
  /// Train mode with running statistics: the renormalised forward above; otherwise
  /// BatchNorm's forward.
  Tensor forward(const Tensor& x) override;
  /// BatchNorm's extra_repr plus ", rmax=..., dmax=...".
  std::string extra_repr() const override;
  /// Sets the clipping bounds (schedulable from the training loop).
  void set_clipping(double rmax, double dmax);
  /// The current bound of r (r in [1/rmax, rmax]).
  double rmax() const { return rmax_; }
  /// The current bound of d (d in [-dmax, dmax]).
  double dmax() const { return dmax_; }
  Tensor last_r;  ///< r (float64, shape (C)) of the last train-mode forward; undefined before
  Tensor last_d;  ///< d (float64, shape (C)) of the last train-mode forward; undefined before

 private:
  double rmax_, dmax_;
};

/// BatchRenorm over (N, C) or (N, C, L): statistics per feature over N (and L).
class BatchRenorm1d : public BatchRenorm<BatchNorm1d> {
 public:
  using BatchRenorm::BatchRenorm;
  std::string type_name() const override { return "BatchRenorm1d"; }
};

/// BatchRenorm over (N, C, H, W): statistics per channel over N, H and W.
class BatchRenorm2d : public BatchRenorm<BatchNorm2d> {
 public:
  using BatchRenorm::BatchRenorm;
  std::string type_name() const override { return "BatchRenorm2d"; }
};

}  // namespace tapegrad::layers
