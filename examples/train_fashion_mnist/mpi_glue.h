#pragma once
// fmnist::DataParallel over MPI (tapegrad::distributed): DistributedDataParallel, optional
// SyncBatchNorm, and the time spent communicating.
#include <memory>
#include <string>

#include "data_parallel_hooks.h"

namespace fmnist {

/// Needs a live tapegrad::distributed::Environment. sync_bn: convert every BatchNorm to
/// SyncBatchNorm in prepare().
std::shared_ptr<DataParallel> make_mpi_data_parallel(bool sync_bn);
/// "rank 0: communication 0.52 s (DDP ... 0.41 s, SyncBatchNorm ... 0.11 s)" for the
/// DataParallel made above (since it was made, evaluation included), or "" for another one.
std::string communication_summary(const DataParallel& dp);

}  // namespace fmnist
