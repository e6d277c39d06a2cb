#pragma once
// The MPI environment of a data-parallel job (namespace tapegrad::distributed).
//
// One process per rank, started by `mpirun -np R prog` (or `mpirun --hostfile hosts ...`
// for several machines). A program creates one Environment at the top of main(); without
// mpirun it is a world of one and no MPI call is made, so the same binary runs alone.
// Collectives here (and in SyncBatchNorm and DistributedDataParallel) must be called by
// every rank in the same order, as MPI requires.
#include <cstdint>
#include <functional>
#include <string>

namespace tapegrad::distributed {

/// True when this process was started by an MPI launcher (OpenMPI's OMPI_COMM_WORLD_SIZE,
/// or PMI_SIZE / PMIX_RANK of MPICH, Slurm and PMIx launchers).
bool launched_by_mpirun();

/// RAII owner of MPI: the constructor calls MPI_Init_thread (MPI_THREAD_FUNNELED: only the
/// main thread calls MPI; OpenMP loops inside ops are fine) when launched_by_mpirun() or
/// `force_mpi`, and the destructor MPI_Finalize. At most one Environment may exist; a
/// second one throws std::logic_error. Without MPI, rank() is 0 and world_size() 1.
/// Unless the environment already sets it, OMPI_MCA_mpi_yield_when_idle=1 is set before
/// MPI_Init: ranks waiting in a collective yield the core instead of spinning, which on a
/// machine shared with other work was measured 2x faster (set it to 0 for dedicated nodes).
class Environment {
 public:
  /// Initialises MPI (see above) with main's argc/argv (may be null). Throws
  /// std::logic_error when an Environment already exists.
  explicit Environment(int* argc = nullptr, char*** argv = nullptr, bool force_mpi = false);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  /// This process's rank in MPI_COMM_WORLD (0 without MPI).
  int rank() const;
  /// Number of processes (1 without MPI).
  int world_size() const;
  /// rank() == 0.
  bool is_root() const { return rank() == 0; }
  /// Whether MPI was initialised (false for a world of one without mpirun).
  bool uses_mpi() const { return owns_; }

 private:
  bool owns_ = false;
};

/// Rank and world size of the current job (0 and 1 when no Environment uses MPI).
int rank();
/// Number of processes of the current job (1 without MPI).
int world_size();
/// True when an Environment with MPI is alive (collectives talk to other ranks).
bool is_initialized();

/// Blocks until every rank reaches it (no-op in a world of one).
void barrier();

/// Ends the whole job (every rank) with `message` on stderr, prefixed by the rank:
/// MPI_Abort(code) under MPI, std::exit(code) otherwise. Use it where one rank failing
/// would leave the others waiting in a collective forever.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

/// Runs `body` and returns its result; an exception escaping it ends the whole job via
/// abort_job with the exception's message ("rank 1: error: ..."), never a hang.
int run_guarded(const std::function<int()>& body);

// barrier() and the collectives below first compare, across ranks, which collective each
// rank is about to post and its size (one small fixed-size allgather): when a rank posts
// another collective or another n than rank 0, every rank throws std::runtime_error naming
// both ("distributed: the ranks' collectives differ: rank 0 calls allreduce_sum of 3 float64
// values, rank 1 calls allreduce_sum of 4 float64 values ...") before any data moves; n
// above INT_MAX (MPI's int counts) throws std::invalid_argument on every rank.

/// Elementwise sum over ranks, in place, of n doubles (every rank gets the same result).
void allreduce_sum(double* data, std::int64_t n);
/// Elementwise sum over ranks, in place, of n int64 values.
void allreduce_sum(std::int64_t* data, std::int64_t n);
/// Every rank's n doubles, rank after rank: out has world_size()·n values.
void allgather(const double* in, std::int64_t n, double* out);

/// Seconds this process spent inside the blocking collectives above (allreduce_sum,
/// allgather, barrier: SyncBatchNorm's statistics and gradient sums), since start.
double blocking_collective_seconds();

}  // namespace tapegrad::distributed
