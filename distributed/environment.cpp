#include <tapegrad/distributed/environment.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sys/prctl.h>
#include <time.h>

#include <tapegrad/distributed/comm.h>

namespace tapegrad::distributed {
namespace {
bool g_alive = false;  // an Environment exists
bool g_mpi = false;    // ... and it initialised MPI
int g_rank = 0, g_size = 1;
MPI_Comm g_comm = MPI_COMM_NULL;
double g_coll_seconds = 0;
detail::WaitPolicy g_wait = detail::WaitPolicy::Backoff;
double g_spin_seconds = 500e-6;
std::vector<std::pair<const void*, std::function<void()>>> g_pending_checks;  // detail::add_pending_check

// TAPEGRAD_MPI_WAIT and TAPEGRAD_MPI_SPIN_US (see comm.h); a bad value throws naming it.
void read_wait_policy() {
  const detail::WaitSettings w =
      detail::parse_wait_settings(std::getenv("TAPEGRAD_MPI_WAIT"), std::getenv("TAPEGRAD_MPI_SPIN_US"));
  g_wait = w.policy;
  g_spin_seconds = w.spin_seconds;
}

// Adds the lifetime of the scope to g_coll_seconds.
struct CollTimer {
  double t0 = MPI_Wtime();
  ~CollTimer() { g_coll_seconds += MPI_Wtime() - t0; }
};
}  // namespace

namespace detail {
MPI_Comm world_comm() {
  if (!g_mpi) throw std::logic_error("distributed: no MPI environment (create a distributed::Environment first)");
  return g_comm;
}
MPI_Comm dup_world() {
  MPI_Comm c;
  check(MPI_Comm_dup(world_comm(), &c), "MPI_Comm_dup");
  return c;
}
WaitPolicy wait_policy() { return g_wait; }

void add_pending_check(const void* owner, std::function<void()> check) {
  remove_pending_check(owner);
  g_pending_checks.emplace_back(owner, std::move(check));
}
void remove_pending_check(const void* owner) {
  std::erase_if(g_pending_checks, [owner](const auto& e) { return e.first == owner; });
}
void run_pending_checks() {
  while (!g_pending_checks.empty()) {
    // the check removes its own entry (before it may throw); a copy survives that
    const std::function<void()> check = g_pending_checks.front().second;
    const void* owner = g_pending_checks.front().first;
    check();
    remove_pending_check(owner);  // in case the check did not
  }
}

WaitSettings parse_wait_settings(const char* wait, const char* spin_us) {
  WaitSettings w;
  if (wait && *wait) {
    const std::string s = wait;
    if (s == "spin")
      w.policy = WaitPolicy::Spin;
    else if (s != "backoff")
      throw std::invalid_argument("TAPEGRAD_MPI_WAIT: expected backoff or spin, got '" + s + "'");
  }
  if (spin_us && *spin_us) {
    char* end = nullptr;
    const double us = std::strtod(spin_us, &end);
    if (end == spin_us || *end != '\0' || !(us >= 0 && us <= 1e7))
      throw std::invalid_argument(std::string("TAPEGRAD_MPI_SPIN_US: expected microseconds in [0, 1e7], got '") +
                                  spin_us + "'");
    w.spin_seconds = us * 1e-6;
  }
  return w;
}

void wait(MPI_Request& req, const char* what) {
  if (req == MPI_REQUEST_NULL) return;
  if (g_wait == WaitPolicy::Spin) {
    check(MPI_Wait(&req, MPI_STATUS_IGNORE), what);
    return;
  }
  int done = 0;
  const double t0 = MPI_Wtime();
  do {  // the partner usually arrives within microseconds: poll first
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
  } while (MPI_Wtime() - t0 < g_spin_seconds);
  long ns = 5000;
  for (;;) {  // then give the core away between tests
    const timespec ts{0, ns};
    nanosleep(&ts, nullptr);
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    ns = std::min(ns * 2, 100000L);
  }
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("distributed: ") + what + " failed: " + std::string(msg, len));
}
}  // namespace detail

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

Environment::Environment(int* argc, char*** argv, bool force_mpi) {
  if (g_alive) throw std::logic_error("distributed::Environment: one already exists (create exactly one, in main)");
  g_alive = true;
  if (!launched_by_mpirun() && !force_mpi) return;  // a world of one, no MPI
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) {
    g_alive = false;
    throw std::logic_error("distributed::Environment: MPI is already initialised elsewhere");
  }
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);  // see the header
  try {
    read_wait_policy();
  } catch (...) {
    g_alive = false;
    throw;
  }
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // 1 µs: detail::wait's short sleeps stay short
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    g_alive = false;
    throw std::runtime_error("distributed::Environment: MPI_Init_thread failed");
  }
  // errors come back as codes (turned into exceptions), not as an abort inside MPI
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);
  owns_ = g_mpi = true;
}

Environment::~Environment() {
  if (owns_) {
    MPI_Comm_free(&g_comm);
    MPI_Finalize();
  }
  g_alive = g_mpi = false;
  g_rank = 0;
  g_size = 1;
}

int Environment::rank() const { return g_rank; }
int Environment::world_size() const { return g_size; }
int rank() { return g_rank; }
int world_size() { return g_size; }
bool is_initialized() { return g_mpi; }

void barrier() {
  if (!g_mpi) return;
  detail::exchange_headers({detail::kBarrier, 0, 0});
  CollTimer t;
  MPI_Request r = MPI_REQUEST_NULL;
  detail::check(MPI_Ibarrier(g_comm, &r), "MPI_Ibarrier");
  detail::wait(r, "MPI_Ibarrier");
}

void abort_job(const std::string& message, int code) {
  std::fprintf(stderr, "rank %d: error: %s\n", g_rank, message.c_str());
  std::fflush(stderr);
  if (g_mpi) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    abort_job(e.what());
  } catch (...) {
    abort_job("unknown exception");
  }
}

void allreduce_sum(double* data, std::int64_t n) { detail::allreduce_sum(data, n, detail::kAllreduceDouble, 0); }
void allreduce_sum(std::int64_t* data, std::int64_t n) { detail::allreduce_sum(data, n, detail::kAllreduceInt64, 0); }
void allgather(const double* in, std::int64_t n, double* out) {
  detail::allgather(in, n, out, detail::kAllgatherDouble, 0);
}

namespace detail {
namespace {
// "SyncBatchNorm statistics with num_features 3 (allgather of 7 float64 values per rank)".
std::string describe(const CollectiveHeader& h) {
  const std::string n = std::to_string(h.count);
  switch (h.op) {
    case kAllreduceDouble: return "allreduce_sum of " + n + " float64 values";
    case kAllreduceInt64: return "allreduce_sum of " + n + " int64 values";
    case kAllgatherDouble: return "allgather of " + n + " float64 values per rank";
    case kBarrier: return "barrier()";
    case kStateCheck: return "a consistency check (check_same_across_ranks: DistributedDataParallel, broadcast_state)";
    case kSyncBatchNormStats:
      return "SyncBatchNorm statistics with num_features " + std::to_string(h.tag) + " (allgather of " + n +
             " float64 values per rank)";
    case kSyncBatchNormGrad:
      return "SyncBatchNorm backward with num_features " + std::to_string(h.tag) + " (allreduce_sum of " + n +
             " float64 values)";
    default: return "collective " + std::to_string(h.op);
  }
}
template <class T>
void allreduce_impl(T* data, std::int64_t n, MPI_Datatype type, CollectiveOp op, std::int64_t tag) {
  if (!g_mpi || g_size == 1) return;
  exchange_headers({op, n, tag});  // throws on every rank when the sizes differ
  CollTimer t;
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), type, MPI_SUM, g_comm, &r), "MPI_Iallreduce");
  wait(r, "MPI_Iallreduce");
}
}  // namespace

std::vector<CollectiveHeader> exchange_headers(const CollectiveHeader& mine) {
  static_assert(sizeof(CollectiveHeader) == 3 * sizeof(std::int64_t));
  run_pending_checks();
  CollTimer t;
  std::vector<CollectiveHeader> all(static_cast<std::size_t>(g_size));
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, g_comm, &r), "MPI_Iallgather");
  wait(r, "MPI_Iallgather");
  const CollectiveHeader& ref = all[0];
  for (int k = 1; k < g_size; ++k) {
    const CollectiveHeader& h = all[static_cast<std::size_t>(k)];
    if (h.op == ref.op && h.count == ref.count && (h.tag == ref.tag || h.op == kStateCheck)) continue;
    throw std::runtime_error("distributed: the ranks' collectives differ: rank 0 calls " + describe(ref) + ", rank " +
                             std::to_string(k) + " calls " + describe(h) +
                             " (every rank must call the same collectives, with the same sizes, in the same order)");
  }
  if (mine.count < 0 || mine.count > std::numeric_limits<int>::max())
    throw std::invalid_argument("distributed: " + describe(mine) + ": expected a count in [0, " +
                                std::to_string(std::numeric_limits<int>::max()) + "] (MPI's int counts)");
  return all;
}

void allreduce_sum(double* data, std::int64_t n, CollectiveOp op, std::int64_t tag) {
  allreduce_impl(data, n, MPI_DOUBLE, op, tag);
}
void allreduce_sum(std::int64_t* data, std::int64_t n, CollectiveOp op, std::int64_t tag) {
  allreduce_impl(data, n, MPI_INT64_T, op, tag);
}

void allgather(const double* in, std::int64_t n, double* out, CollectiveOp op, std::int64_t tag) {
  if (!g_mpi || g_size == 1) {
    std::copy(in, in + n, out);
    return;
  }
  exchange_headers({op, n, tag});  // throws on every rank when the sizes differ
  CollTimer t;
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Iallgather(in, static_cast<int>(n), MPI_DOUBLE, out, static_cast<int>(n), MPI_DOUBLE, g_comm, &r),
        "MPI_Iallgather");
  wait(r, "MPI_Iallgather");
}
}  // namespace detail

double blocking_collective_seconds() { return g_coll_seconds; }

}  // namespace tapegrad::distributed
