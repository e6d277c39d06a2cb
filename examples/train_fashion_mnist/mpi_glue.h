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
/// "communication (gradient allreduce) 0.41 s of 12.3 s in train steps (3.3 %)" for the
/// DataParallel made above, or "" for another one.
std::string communication_summary(const DataParallel& dp);

}  // namespace fmnist
