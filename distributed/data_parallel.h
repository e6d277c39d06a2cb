#pragma once
// DistributedDataParallel: gradient averaging across ranks, as PyTorch's DDP (Li et al.
// 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training").
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <tapegrad/layers/module.h>

namespace tapegrad::distributed {

/// How DistributedDataParallel reduces gradients and synchronises buffers.
struct DDPOptions {
  /// Bucket capacity in bytes (PyTorch's bucket_cap_mb = 25). Gradients are packed into
  /// buckets in reverse parameter order (the order backward produces them); a bucket is
  /// reduced as one MPI_Iallreduce as soon as all its gradients are final.
  std::size_t bucket_cap_bytes = std::size_t(25) << 20;
  /// Every rank gets rank 0's buffers (running statistics) once per train-mode step, as
  /// PyTorch's broadcast_buffers = true. In a training step (train mode, grad mode on,
  /// outside no_sync, followed by backward and finish()) the copy is made in finish(), of
  /// rank 0's buffers as its forward left them, overlapping the backward (like PyTorch's
  /// post-forward buffer hook location): from finish() to the next forward every rank holds
  /// rank 0's buffers, which is what PyTorch's pre-forward broadcast gives that next forward;
  /// between a forward and finish() a rank holds its own update of them. Any other train-mode
  /// forward (under NoGradGuard, inside no_sync, or after a forward that saw no finish())
  /// copies rank 0's buffers before it runs, as PyTorch does.
  bool broadcast_buffers = true;
  /// A parameter of at least this many bytes is a bucket of its own, and its gradient is
  /// reduced in its own memory (no copy into a bucket and back; PyTorch's
  /// gradient_as_bucket_view in spirit): on the Fashion-MNIST MLP that is the 784x256
  /// weight, 85% of the gradient bytes. A gradient that shares its memory, or a parameter
  /// without a gradient on this rank, falls back to the packed copy. SIZE_MAX: never.
  std::size_t inplace_min_bytes = std::size_t(256) << 10;
};

/// Wraps a module for data-parallel training: every rank holds a replica, runs forward and
/// backward on its own shard of the batch, and after finish() every parameter's .grad is
/// the average over ranks of the replicas' gradients, so an identical optimizer step keeps
/// the replicas identical.
///
/// Construction (collective): checks that every rank has the same parameter and buffer
/// layout (throws std::runtime_error on every rank naming the first difference) and copies
/// rank 0's parameters and buffers to all ranks.
/// Every forward that can lead to collectives (train mode, or grad mode on) posts a step
/// check: mode, grad mode, no_sync, every parameter's requires_grad and whether a
/// ZeroRedundancyOptimizer shards it (reduce-scatter or allreduce), compared across ranks.
/// A training step does not wait for it in the forward: it completes at the step's first
/// gradient hook (before any reduction is posted), before any other collective of
/// distributed/ (SyncBatchNorm's), or in finish() or the next forward, whichever comes first.
/// Ranks that disagree throw std::runtime_error on every rank naming the first difference
/// ("rank 1 has 'mode eval()'"), in that step, before a gradient of it is communicated;
/// other forwards wait for the check before they run.
/// During backward: a post-accumulate-grad hook per parameter marks its gradient final;
/// buckets whose gradients are all final are launched in bucket order (MPI_Iallreduce on
/// DDP's own communicator), overlapping with the rest of the backward.
/// finish(): launches buckets that are still waiting (parameters that got no gradient in
/// this backward, on some rank: their contribution is zero), waits for all, and writes
/// sum/world_size into every .grad (defining zero gradients where none arrived), and copies
/// rank 0's buffers into every rank's (DDPOptions::broadcast_buffers). Call it
/// between loss.backward() and optimizer.step(); an optimizer step with unfinished
/// reductions throws std::logic_error. Once a ZeroRedundancyOptimizer shards this DDP
/// (zero_redundancy_optimizer.h), finish() reduce-scatters instead and .grad stays local.
/// Every rank must run the same sequence of forward / backward / finish (collectives).
class DistributedDataParallel {
 public:
  /// Wraps `module` (collective: see Construction above). Needs an initialised
  /// Environment (distributed/environment.h).
  explicit DistributedDataParallel(layers::ModulePtr module, DDPOptions options = {});
  /// Removes the hooks and frees the communicator; destroy it before the Environment.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// The wrapped module's forward (after the step check and buffer broadcast, or posting them:
  /// see DDPOptions::broadcast_buffers and the class comment).
  Tensor forward(const Tensor& x);
  /// forward(x).
  Tensor operator()(const Tensor& x) { return forward(x); }
  /// Completes the gradient averaging of the last backward (see the class comment). A
  /// no-op when nothing is pending, or inside no_sync().
  void finish();

  /// RAII: while alive, backward passes only accumulate local gradients (no
  /// communication); the first backward after it ends averages the accumulated sum
  /// (PyTorch's no_sync(), for gradient accumulation).
  class NoSyncGuard {
   public:
    /// Suspends gradient averaging of `ddp` until destroyed (then restores the previous state).
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  /// A NoSyncGuard on this DDP: `{ auto guard = ddp.no_sync(); ... }`.
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// The wrapped module (for eval, state_dict, ...).
  layers::Module& module() { return *module_; }
  /// The wrapped module's shared handle.
  layers::ModulePtr module_ptr() { return module_; }
  /// Buckets as parameter indices into module().parameters(), in reduction order (a
  /// parameter of >= DDPOptions::inplace_min_bytes is alone in its bucket).
  std::vector<std::vector<std::size_t>> bucket_layout() const;
  /// Seconds spent in DDP's MPI calls (gradient reductions: launch, test, wait; the buffer
  /// broadcast) since construction, and how many of those were spent blocked in finish().
  double comm_seconds() const;
  /// Of comm_seconds(), the seconds spent blocked in finish().
  double wait_seconds() const;
  /// Buckets started from the backward's hooks (overlapping it) and from finish(), since
  /// construction.
  std::size_t buckets_launched_in_backward() const;
  /// Buckets started from finish(), since construction.
  std::size_t buckets_launched_in_finish() const;

 private:
  struct State;
  friend class NoSyncGuard;
  friend class ZeroRedundancyOptimizer;
  // ZeRO-1 (ZeroRedundancyOptimizer): from now on finish() reduce-scatters each bucket (rank
  // r receives the average of the r-th of world_size contiguous chunks of the bucket) and
  // leaves every .grad as this rank's local gradient. Returns this rank's pieces: (a view of
  // the parameter's elements in its chunks, requiring grad; its averaged gradient, the
  // piece's .grad). Every rank must call it, between steps.
  std::vector<std::pair<Tensor, Tensor>> enable_sharding();
  // Whether finish() wrote this step's shard gradients since the last allgather_parameters().
  bool shard_gradients_ready() const;
  // Collective: every rank's updated chunks to every rank (one MPI_Iallgatherv per bucket,
  // in the parameter's own memory for a bucket of one parameter).
  void allgather_parameters();
  layers::ModulePtr module_;
  std::unique_ptr<State> s_;
};

}  // namespace tapegrad::distributed
