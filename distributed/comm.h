#pragma once
// Internal: the communicators behind the public API (includes mpi.h; not for users).
#include <mpi.h>

#include <functional>
#include <string>

namespace tapegrad::distributed::detail {

/// Communicator of the collectives of environment.h and SyncBatchNorm (a duplicate of
/// MPI_COMM_WORLD). Only valid while is_initialized().
MPI_Comm world_comm();
/// Checks that must be complete before this process posts another collective on
/// world_comm(): DistributedDataParallel posts its per-step check without waiting for it, and
/// a module's own collectives in the forward (SyncBatchNorm's allgather) must not pair with a
/// partner that is about to throw from that check. run_pending_checks() calls every
/// registered check (each removes itself before it may throw); environment.h's collectives,
/// check_same_across_ranks and broadcast_state call it first. `owner` identifies the entry.
void add_pending_check(const void* owner, std::function<void()> check);
/// Removes `owner`'s entry (a no-op when it has none).
void remove_pending_check(const void* owner);
/// Runs (and thereby completes) every registered check; rethrows the first check's exception.
void run_pending_checks();
/// A new duplicate of the world communicator (DistributedDataParallel keeps its own, so
/// its non-blocking reductions never pair up with another component's collectives).
MPI_Comm dup_world();
/// Throws std::runtime_error naming `what` and MPI's error string when rc != MPI_SUCCESS.
void check(int rc, const char* what);

/// How a rank waits for a request (TAPEGRAD_MPI_WAIT, read once at MPI start):
///   "backoff" (default): MPI_Test in a loop for about spin_us (TAPEGRAD_MPI_SPIN_US,
///     default 500 µs, about half a step of the Fashion-MNIST MLP: a partner that has not
///     arrived by then is not running; OpenMPI yields inside MPI_Test meanwhile), then
///     MPI_Test between sleeps of 5 µs doubling to 100 µs: a rank kept waiting gives its
///     core back (to the rank it waits for, on a machine with as many ranks as cores, or
///     to other work) instead of polling it away. Short waits stay polls: a sleep wakes
///     late (a 5 µs nanosleep took 173 µs on average on this 2-core VM under load 10);
///   "spin": MPI_Wait (OpenMPI polls, yielding per mpi_yield_when_idle).
/// The sleeps run with a 1 µs timer slack (prctl) so a 5 µs sleep is not rounded to 50 µs.
enum class WaitPolicy { Backoff, Spin };
WaitPolicy wait_policy();
/// The policy and spin time from the values of TAPEGRAD_MPI_WAIT and TAPEGRAD_MPI_SPIN_US
/// (null or empty: the defaults). Throws std::invalid_argument naming the variable, what
/// it expects and the value given.
struct WaitSettings {
  WaitPolicy policy = WaitPolicy::Backoff;
  double spin_seconds = 500e-6;
};
WaitSettings parse_wait_settings(const char* wait, const char* spin_us);
/// Completes `req` per wait_policy(); throws (via check) naming `what` on an MPI error.
/// A no-op for MPI_REQUEST_NULL.
void wait(MPI_Request& req, const char* what);

}  // namespace tapegrad::distributed::detail
