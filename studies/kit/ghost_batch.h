#pragma once
// Per-replica BatchNorm statistics inside one process ("ghost batches", Hoffer et al. 2017,
// "Train longer, generalize better", Algorithm 1): R virtual replicas, each normalising
// its own m-row share of a global batch of R·m rows with its own batch statistics.
#include <memory>

#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/module.h>

namespace studies::kit {

/// Wraps a BatchNorm1d/2d or BatchRenorm1d/2d (child "bn") as R data-parallel replicas.
///
/// Train mode, input (R·m, C, *): rows [r·m, (r+1)·m) go through `bn` as replica r's
/// batch; the outputs are concatenated in row order. Each replica starts from the same
/// running statistics (those before this forward) and updates its own copy from its own
/// sub-batch; afterwards the module keeps replica 0's (running_mean, running_var,
/// num_batches_tracked). This is DistributedDataParallel with broadcast_buffers = true,
/// which copies rank 0's buffers to every rank before each forward, so rank 0's buffers
/// are the ones that persist and are checkpointed. Gradients: with every replica's loss a
/// mean over its m rows, the mean of the R losses is the mean over all R·m rows, whose
/// gradient is DDP's average of the per-replica gradients (tests/test_norm_study.cpp
/// "[ghost]" checks this against R separate replicas in float64, for the MLP's
/// BatchNorm1d/BatchRenorm1d on (N, C) and the CNN's BatchNorm2d/BatchRenorm2d on (N, C, H, W)).
/// Eval mode: the whole batch through `bn` (running statistics; no batch dependence).
/// R = 1 is `bn` itself. Throws std::invalid_argument for R < 1, or in train mode when
/// the batch is not a multiple of R (naming both).
class GhostBatchNorm : public tapegrad::layers::Module {
 public:
  GhostBatchNorm(std::shared_ptr<tapegrad::layers::BatchNormBase> bn, int replicas);
  tapegrad::Tensor forward(const tapegrad::Tensor& x) override;
  std::string type_name() const override { return "GhostBatchNorm"; }
  std::string extra_repr() const override;

  int replicas() const { return replicas_; }
  tapegrad::layers::BatchNormBase& bn() { return *bn_; }

 private:
  std::shared_ptr<tapegrad::layers::BatchNormBase> bn_;
  int replicas_;
};

}  // namespace studies::kit
