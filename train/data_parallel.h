#pragma once
// Data-parallel training for fit() and evaluate(), without a compile-time dependency on MPI:
// DataParallel is what they need from a runtime; make_mpi_data_parallel() gives the MPI one
// (tapegrad::distributed: DistributedDataParallel, optional SyncBatchNorm) when this build
// has MPI, and throws otherwise.
//
// The scheme: every rank runs the same program on the same data with the same seed. Each
// global batch of B rows is drawn identically on every rank (the loader's shared generator)
// and rank r trains on rows [r·B/R, (r+1)·B/R) only, so the per-rank batch is B/R; gradients
// are averaged over ranks, so with SyncBatchNorm the run is the single-process run at batch B
// (up to float rounding). Or the loader has a distributed::DistributedSampler
// (DataLoaderOptions::sampler, batch_size B/R): each rank's loader batches, decodes and
// prefetches (num_workers) its own share, and fit trains on its whole batches. The global
// batches are then other ones (the sampler's strided shares of its own permutation, padded),
// so such a run is not the single-process run's order. Evaluation is split by batches with
// single-process totals.
// Checkpoints are written by rank 0 only (then a barrier); resume reads the same file on
// every rank.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/tensor.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/optimizer.h>

namespace tapegrad::train {

/// What fit() and evaluate() need from a data-parallel run, with MPI kept out of train/: a
/// rank, a world size, the prepared model and a few collectives. The MPI implementation comes
/// from tapegrad_distributed (mpi_available()). Every collective must be called by every rank.
class DataParallel {
 public:
  virtual ~DataParallel() = default;
  /// This process's rank in [0, world_size()).
  virtual int rank() const = 0;
  /// Number of processes.
  virtual int world_size() const = 0;
  /// Call once with the freshly built model, before the optimizer is made: may swap its
  /// BatchNorm layers for SyncBatchNorm (new parameter tensors) and wraps it for gradient
  /// averaging. fit() throws std::logic_error when it was not called.
  virtual void prepare(std::shared_ptr<layers::Module> model) = 0;
  /// Whether prepare() was called.
  virtual bool prepared() const = 0;
  /// Makes an optimizer from parameters (e.g. `[&](std::vector<Tensor> p) { return
  /// std::make_unique<optim::Adam>(p, o); }`).
  using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  /// The optimizer fit() is to step, after prepare(): `make(params)` by default; the MPI one
  /// made with zero_redundancy wraps it in a ZeroRedundancyOptimizer over the prepared
  /// model's parameters (ZeRO-1: each rank updates its shard; no optimizer state_dict).
  virtual std::unique_ptr<optim::Optimizer> make_optimizer(std::vector<Tensor> params, const OptimizerFactory& make) {
    return make(std::move(params));
  }
  /// The prepared model's forward on this rank's rows (train mode).
  virtual Tensor forward(const Tensor& x) = 0;
  /// After loss.backward(), before optimizer.step(): completes the gradient averaging.
  virtual void after_backward() = 0;
  /// Mean of `value` over ranks.
  virtual double mean(double value) = 0;
  /// Elementwise sums over ranks of n values, in place (every rank gets the totals).
  virtual void sum(double* values, std::int64_t n) = 0;
  /// The int64 form of sum().
  virtual void sum(std::int64_t* values, std::int64_t n) = 0;
  /// Returns once every rank has called it.
  virtual void barrier() = 0;
  /// Ends the job from one rank (the others may be waiting in a collective). Default: no-op.
  virtual void abort(const std::string& /*message*/) {}
};

/// Collective: what fit() checks first in a data-parallel run (world_size() > 1). Compares
/// across ranks the training set's rows, the loader's batch_size and drop_last, and the
/// validation rows and eval batch size (fit's `validation`, null: none), since different
/// batch counts would leave ranks waiting for each other. Throws std::invalid_argument on
/// every rank naming the first rank that differs from rank 0 and both values ("fit: the
/// ranks' data differ: rank 0 has 80 training rows, rank 1 has 96 ..."), and on every rank
/// for a partial last batch (drop_last = false) whose rows do not divide by the ranks,
/// naming its rows and the fix (drop_last = true, or a divisible size); with a loader that
/// gives this rank's share (loader_gives_rank_share) the rows and batches compared are the
/// share's, the dataset sizes are compared too, and a partial last batch is not split.
void check_same_data(DataParallel& parallel, const data::DataLoader& loader, const data::Dataset* validation,
                     std::int64_t eval_batch_size);
/// Collective: what evaluate() checks first in a data-parallel run (world_size() > 1): the
/// dataset's rows and the batch size, compared across ranks. Throws std::invalid_argument on
/// every rank naming both ("evaluate: the ranks' data differ: rank 0 has rows 10, rank 1 has
/// 14 ...").
void check_same_eval_data(DataParallel& parallel, const data::Dataset& ds, std::int64_t batch_size);
/// Whether fit() trains on `loader`'s whole batches as this rank's share: true when its
/// sampler splits the dataset over parallel.world_size() ranks at parallel.rank() (a
/// distributed::DistributedSampler), false when the sampler gives the whole dataset
/// (num_replicas() 1: the loader's own order, whose global batches fit splits by rows).
/// Throws std::invalid_argument for a sampler of another replica count or rank, naming both
/// ("fit: the loader's sampler splits the data over 3 replicas (rank 0), the run has 2 ranks
/// (this is rank 0)").
bool loader_gives_rank_share(const DataParallel& parallel, const data::DataLoader& loader);
/// Rows of global batch i each of `world_size` ranks trains on: the batch's rows (batch_size,
/// or fewer for a partial last batch) / world_size. Throws std::out_of_range for a bad i.
std::int64_t rows_per_rank(const data::DataLoader& loader, std::int64_t i, int world_size);
/// Runs `body`. With `parallel` and parallel->world_size() > 1, an exception escaping it
/// ends the whole job through parallel->abort (its message on stderr, "rank 1: error: ...")
/// instead of leaving the other ranks waiting in a collective; otherwise (and when abort
/// returns, as DataParallel's default does) the exception propagates.
void run_parallel_guarded(DataParallel* parallel, const std::function<void()>& body);

/// Whether this build of tapegrad_train has MPI (tapegrad_distributed).
bool mpi_available();

/// The MPI DataParallel. Needs a live tapegrad::distributed::Environment (created by the
/// program before this call). sync_bn: prepare() converts every BatchNorm to SyncBatchNorm
/// (statistics over every rank's rows) and buffers are then not broadcast. Throws
/// std::runtime_error when this build has no MPI (mpi_available() false). zero_redundancy:
/// make_optimizer() shards the optimizer across ranks (distributed::ZeroRedundancyOptimizer).
std::shared_ptr<DataParallel> make_mpi_data_parallel(bool sync_bn, bool zero_redundancy = false);

/// "rank 0: communication 0.52 s (DDP gradient allreduce and buffer broadcast 0.41 s,
/// SyncBatchNorm and other blocking collectives 0.11 s)" for a DataParallel made by
/// make_mpi_data_parallel (since it was made, evaluation included), or "" for another one.
std::string communication_summary(const DataParallel& parallel);

}  // namespace tapegrad::train
