#pragma once
// `norm_study batch-size` with its R replicas as the R ranks of an MPI job (mpirun -np R):
// per-replica statistics computed by separate processes, the real thing the in-process
// ghost batches (ghost_batch.h) stand in for. Built with tapegrad_distributed only.
#include "batch_size.h"

namespace normstudy {

/// Trains every (kind, m, seed) of `o` as run_batch_size does, one run after another, each
/// with its o.replicas replicas as the ranks of this job; every rank single-threaded.
/// Every rank draws the same shuffled global batch of R·m rows and trains on its rows
/// [rank·m, (rank + 1)·m) under distributed::DistributedDataParallel (averaged gradients):
///  batch / renorm: BatchNorm1d / BatchRenorm1d on the rank's m rows, broadcast_buffers
///    (rank 0's running statistics persist, as the ghost batches keep replica 0's);
///  sync: distributed::SyncBatchNorm (statistics over all R·m rows);
///  group / layer / none: no batch statistics, DDP only.
/// The same seeds, initial weights, batches, lr and clipping schedule as the in-process run,
/// so the two differ only by float32 rounding (sums over ranks in another order). The crash
/// test uses the mean loss over ranks, so all ranks stop together. Rank 0 evaluates its net
/// on the test set (eval mode); the returned result is complete on rank 0 only (the other
/// ranks' test figures are 0). Collective: every rank calls it with the same options and
/// data. Throws std::invalid_argument (on every rank) when o.replicas differs from the
/// world size, for --model other than mlp, or for bad m, naming the values.
BatchSizeResult run_batch_size_ranks(const BatchSizeOptions& o, const StudyData& data);

}  // namespace normstudy
