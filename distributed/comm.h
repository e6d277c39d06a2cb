#pragma once
// Internal: the communicators behind the public API (includes mpi.h; not for users).
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

/// Which collective a rank is about to post on world_comm() (CollectiveHeader::op).
enum CollectiveOp : std::int64_t {
  kAllreduceDouble = 1,   // allreduce_sum(double*, n)
  kAllreduceInt64,        // allreduce_sum(std::int64_t*, n)
  kAllgatherDouble,       // allgather(in, n, out)
  kBarrier,               // barrier()
  kStateCheck,            // check_same_across_ranks (tag: the state's hash)
  kSyncBatchNormStats,    // SyncBatchNorm's forward allgather of (count, mean, M2) (tag: num_features)
  kSyncBatchNormGrad,     // SyncBatchNorm's backward allreduce of Σdy, Σdy·(x - μ) (tag: num_features)
};
/// What a rank is about to post on world_comm(). Every collective there (environment.h's,
/// SyncBatchNorm's, check_same_across_ranks) first allgathers this fixed-size header, so
/// ranks about to post different collectives, or the same one with other sizes, find out
/// before any payload moves (MPI's own answer to mismatched counts is MPI_ERR_TRUNCATE on
/// some ranks and silently mis-sized data on others).
struct CollectiveHeader {
  std::int64_t op = 0;     ///< a CollectiveOp
  std::int64_t count = 0;  ///< the payload's element count per rank
  std::int64_t tag = 0;    ///< fixed by the caller (SyncBatchNorm: num_features; 0 otherwise)
};
/// Collective on world_comm(): runs run_pending_checks(), then allgathers every rank's
/// header. Throws std::runtime_error on every rank (they all see the same headers) when an
/// op or count differs from rank 0's (or, unless op is kStateCheck, a tag), naming rank 0's
/// and the first differing rank's collective with its sizes, e.g. "rank 0 calls SyncBatchNorm
/// statistics with num_features 3 (allgather of 7 float64 values per rank), rank 1 calls
/// SyncBatchNorm statistics with num_features 4 (allgather of 9 float64 values per rank)";
/// std::invalid_argument on every rank for a count outside [0, INT_MAX] (MPI's int counts).
/// Returns every rank's header (world_size() of them). Only under MPI with world_size() > 1.
std::vector<CollectiveHeader> exchange_headers(const CollectiveHeader& mine);
/// The sum over ranks of n doubles (int64 values) in place, as allreduce_sum, posted as `op`
/// with `tag` in its header (SyncBatchNorm's backward).
void allreduce_sum(double* data, std::int64_t n, CollectiveOp op, std::int64_t tag);
void allreduce_sum(std::int64_t* data, std::int64_t n, CollectiveOp op, std::int64_t tag);
/// Every rank's n doubles, as allgather, posted as `op` with `tag` in its header.
void allgather(const double* in, std::int64_t n, double* out, CollectiveOp op, std::int64_t tag);

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
