#pragma once
// ZeRO-1 (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", stage 1): the optimizer state and step sharded across data-parallel
// ranks; PyTorch's torch.distributed.optim.ZeroRedundancyOptimizer in spirit, with
// element-granular shards and a reduce-scatter of the gradients in place of the allreduce.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/optim/optimizer.h>

namespace tapegrad::distributed {

/// Wraps an optimizer so that each rank updates only its shard of a DistributedDataParallel's
/// parameters. Each bucket's flat gradient is cut into world_size contiguous chunks; in
/// finish() rank r receives the average of its chunks (MPI_Ireduce_scatter, started during
/// the backward as the allreduce was), step() runs the wrapped optimizer on the views of
/// those elements only (its state, e.g. Adam's moments, exists for them only), then every
/// rank's updated elements go to every rank (one MPI_Iallgatherv per bucket, in the
/// parameter's own memory for a bucket of one parameter). The communication volume equals
/// one allreduce's; the optimizer's work and memory are divided by world_size. An
/// element-wise optimizer (SGD, Adam, AdamW, RMSprop) gives the same parameters as the
/// unsharded run, bit for bit on 2 ranks (tests/distributed/test_mpi_zero1.cpp).
///
/// Differences from an unsharded optimizer, all of them thrown or documented:
/// - after finish(), each parameter's .grad is this rank's local gradient, not the average
///   (only the shard's average exists): clip gradients by the average inside the wrapped
///   optimizer, not with clip_grad_norm_ on .grad;
/// - state_dict() / load_state_dict() throw std::logic_error (each rank holds its shard's
///   state; PyTorch's consolidate_state_dict is not implemented);
/// - step() when no finish() completed a backward since the last step is a no-op on every
///   rank (nothing was reduced).
/// Construction: every rank, between steps (after finish()), once per DDP; then the DDP
/// reduce-scatters for good. Every rank must call step() (a collective).
class ZeroRedundancyOptimizer final : public optim::Optimizer {
 public:
  /// Makes the wrapped optimizer over this rank's shard, e.g.
  /// `[](std::vector<Tensor> shard) { return std::make_unique<optim::Adam>(shard, opts); }`.
  using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> shard)>;
  /// Shards `ddp`'s parameters (those requiring grad) across the ranks. Throws
  /// std::invalid_argument for an empty factory or one returning null, std::logic_error when
  /// `ddp` is already sharded or between backward and finish(). Keep `ddp` alive as long.
  ZeroRedundancyOptimizer(DistributedDataParallel& ddp, const Factory& make_optimizer);

  /// The wrapped optimizer's step on this rank's shard, then the parameters' allgather.
  void step() override;
  /// "ZeroRedundancyOptimizer(<wrapped type>)".
  std::string type_name() const override;
  /// One group: the DDP's parameters (zero_grad clears their .grad).
  std::size_t num_param_groups() const override { return 1; }
  /// The DDP's parameters. Throws std::out_of_range for group != 0.
  const std::vector<Tensor>& group_params(std::size_t group) const override;
  /// The wrapped optimizer's first group's lr (schedulers read and write it).
  double lr(std::size_t group) const override;
  /// Sets the lr of every group of the wrapped optimizer.
  void set_lr(std::size_t group, double lr) override;
  /// The optimizer over this rank's shard.
  optim::Optimizer& wrapped() { return *inner_; }
  /// Elements of the parameters this rank updates.
  std::int64_t shard_numel() const { return shard_numel_; }

 protected:
  std::vector<std::string> state_names() const override { return {}; }
  std::vector<std::pair<std::string, double>> group_options(std::size_t group) const override;
  std::string check_group_options(std::size_t group, const std::map<std::string, double>& values) const override;
  void set_group_options(std::size_t group, const std::map<std::string, double>& values) override;

 private:
  DistributedDataParallel& ddp_;
  std::vector<Tensor> params_;
  std::unique_ptr<optim::Optimizer> inner_;
  std::int64_t shard_numel_ = 0;
};

}  // namespace tapegrad::distributed
