#pragma once
// Internal: the communicators behind the public API (includes mpi.h; not for users).
#include <mpi.h>

#include <string>

namespace tapegrad::distributed::detail {

/// Communicator of the collectives of environment.h and SyncBatchNorm (a duplicate of
/// MPI_COMM_WORLD). Only valid while is_initialized().
MPI_Comm world_comm();
/// A new duplicate of the world communicator (DistributedDataParallel keeps its own, so
/// its non-blocking reductions never pair up with another component's collectives).
MPI_Comm dup_world();
/// Throws std::runtime_error naming `what` and MPI's error string when rc != MPI_SUCCESS.
void check(int rc, const char* what);

}  // namespace tapegrad::distributed::detail
