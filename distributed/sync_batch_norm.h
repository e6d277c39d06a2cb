#pragma once
// SyncBatchNorm: batch normalisation whose statistics cover every rank's batch (PyTorch's
// torch.nn.SyncBatchNorm), so data-parallel training normalises as one process would with
// the concatenated batch.
#include <memory>

#include <tapegrad/layers/batch_norm.h>

namespace tapegrad::distributed {

/// BatchNorm over (N, C), (N, C, L) or (N, C, H, W) whose train-mode statistics are those
/// of the concatenation of all ranks' inputs (per-rank N may differ, even 1 or 0, as long
/// as the global count per channel m = Σ_r N_r·L (or N_r·H·W) is above 1).
///
/// Forward (train, or track_running_stats = false): each rank computes per channel its
/// count, mean and M2 = Σ(x - mean)²; one allgather of (count, mean, M2) per rank, merged in
/// rank order with Chan, Golub & LeVeque's (1979) parallel update
/// M2 = M2_a + M2_b + δ²·n_a·n_b/n (never E[x²] - E[x]²), so every rank gets the same bits.
/// Normalises with the biased variance M2/m through functional::batch_norm_with_stats, which
/// also updates the running statistics from the global batch exactly as BatchNorm does
/// (functional::RunningStats: factor momentum or 1/(num_batches_tracked + 1), running_var
/// from M2/(m - 1) unless unbiased_running_var = false, num_batches_tracked += 1).
/// Backward: batch_norm's, with one allreduce of the per-channel sums Σdy and Σdy·(x - μ)
/// (2C doubles) before dx = γ·rstd·(dy - Σdy/m - x̂·Σ(dy·x̂)/m) locally. The weight and bias
/// gradients are this rank's own Σdy·x̂ and Σdy (their sum over ranks is BatchNorm's
/// gradient on the concatenation; DistributedDataParallel averages them).
/// Differentiable twice and more (create_graph): the backward is recomputed from differentiable
/// ops, with the whole batch's statistics and means through a differentiable all-reduce of the
/// per-channel sums (its backward is the same all-reduce: the adjoint of a sum over ranks);
/// every rank must then run the same create_graph passes and second backwards.
/// Eval mode with running statistics: plain BatchNorm, no communication.
/// Every rank must run every train-mode forward and backward (collectives). m <= 1 throws
/// std::invalid_argument on every rank (they all see the same m) before any buffer changes.
/// A train-mode forward whose layer has another num_features than the other ranks' layer at
/// that point (the collectives pair up in call order) throws std::runtime_error on every rank
/// naming both ("rank 0 calls SyncBatchNorm statistics with num_features 3 ..., rank 1 calls
/// SyncBatchNorm statistics with num_features 4 ..."), before any buffer changes.
/// state_dict keys are BatchNorm's (weight, bias, running_mean, running_var,
/// num_batches_tracked), so checkpoints move between the two. A world of one (no mpirun)
/// is exactly BatchNorm.
class SyncBatchNorm : public layers::BatchNormBase {
 public:
  /// SyncBatchNorm over `num_features` channels C; throws as BatchNormBase does.
  explicit SyncBatchNorm(std::int64_t num_features, layers::BatchNormOptions options = {})
      : BatchNormBase(num_features, options) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SyncBatchNorm"; }

 protected:
  void check_input(const Tensor& x) const override;
};

/// Replaces every BatchNorm1d and BatchNorm2d in `module`'s tree by a SyncBatchNorm with
/// the same options, values of weight, bias and buffers, and train/eval mode. Returns
/// `module`, or a new SyncBatchNorm when `module` itself is a BatchNorm (PyTorch's
/// SyncBatchNorm.convert_sync_batchnorm). The parameters are new tensors: build the
/// optimizer (and DistributedDataParallel) after converting. Children are swapped through
/// Module::replace_child, which Sequential (and so models::MLP) follows; a custom module
/// that calls a BatchNorm through its own member pointer keeps calling the old layer, so
/// build such a model with SyncBatchNorm directly. Throws std::invalid_argument for a null
/// module and for a fused BatchNorm1dReLU (layers::fuse_modules): convert first, then fuse.
layers::ModulePtr convert_sync_batchnorm(layers::ModulePtr module);

}  // namespace tapegrad::distributed
