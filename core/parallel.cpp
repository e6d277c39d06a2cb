#include <tapegrad/core/parallel.h>

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <Eigen/Core>
#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

extern "C" void openblas_set_num_threads(int num_threads);

namespace tapegrad {
namespace {
int initial_threads() {
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}
std::atomic<int> g_threads{0};

// ---- tapegrad's thread pool -------------------------------------------------------------
// One job at a time. A job is nt shares; the caller and the woken workers claim shares from
// one atomic ticket until none is left, so a worker that is slow to wake up (asleep, or
// descheduled by another busy process) finds its shares already done by the others instead
// of holding them up. The caller then waits only for the shares other threads have claimed.
// Every wait (a worker for its next job, the caller for claimed shares) spins for at most
// the spin budget, then sleeps on a futex: back-to-back regions of a step find the workers
// awake, and a machine shared with another busy process loses at most the budget per wait
// to spinning, instead of a scheduler time slice per region (what libgomp's default of
// ~300,000 spins per wait cost: a 24 ms epoch took 285-1532 ms).

// The spin budget: TAPEGRAD_SPIN_US (microseconds, 0-10000; read once), else 50 µs.
std::chrono::nanoseconds spin_budget() {
  static const std::chrono::nanoseconds budget = [] {
    long us = 50;
    if (const char* v = std::getenv("TAPEGRAD_SPIN_US")) {
      char* end = nullptr;
      const long parsed = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && parsed >= 0 && parsed <= 10000) us = parsed;
    }
    return std::chrono::nanoseconds(us * 1000);
  }();
  return budget;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "futex words must be plain 32-bit integers");

// Waits until word != old: spins for the budget, then sleeps. `sleeping` tells the waker to
// issue the (system-call) wake; the seq_cst store and load pair with the waker's seq_cst
// change and load, so a wake is never missed.
void wait_for_change(std::atomic<std::uint32_t>& word, std::uint32_t old, std::atomic<std::uint32_t>& sleeping) {
  if (word.load(std::memory_order_acquire) != old) return;
  const auto deadline = std::chrono::steady_clock::now() + spin_budget();
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (word.load(std::memory_order_acquire) != old) return;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  while (word.load(std::memory_order_acquire) == old) {
    sleeping.store(1, std::memory_order_seq_cst);
    if (word.load(std::memory_order_seq_cst) == old) futex_wait(word, old);
    sleeping.store(0, std::memory_order_relaxed);
  }
}

void wake_if_sleeping(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleeping) {
  if (sleeping.load(std::memory_order_seq_cst) != 0) futex_wake_all(word);
}

thread_local bool t_in_region = false;

struct alignas(64) WorkerSlot {
  std::atomic<std::uint32_t> job{0};       // the job this worker is asked to help with
  std::atomic<std::uint32_t> sleeping{0};  // 1 while the worker may be asleep on `job`
};

// The ticket: job id (32 bits) | next unclaimed share (16) | number of shares (16).
constexpr int kMaxShares = 0xffff;
constexpr std::uint64_t ticket_of(std::uint32_t job, std::uint32_t next, std::uint32_t nt) {
  return (std::uint64_t{job} << 32) | (std::uint64_t{next} << 16) | nt;
}

struct Pool {
  std::mutex busy;  // held by the region in progress; another thread's region runs alone
  std::vector<std::unique_ptr<WorkerSlot>> slots;  // slot i: worker i + 1
  std::uint32_t job = 0;
  // the job's function (written before its ticket is published, read after a claim)
  void (*fn)(void*, int, int) noexcept = nullptr;
  void* ctx = nullptr;
  alignas(64) std::atomic<std::uint64_t> ticket{0};
  alignas(64) std::atomic<std::uint32_t> done{0};  // shares of the job finished
  std::atomic<std::uint32_t> caller_sleeping{0};

  // Claims and runs shares of job j until none is left (or the job is over).
  void run_shares(std::uint32_t j) {
    std::uint64_t cur = ticket.load(std::memory_order_acquire);
    for (;;) {
      const std::uint32_t next = static_cast<std::uint32_t>(cur >> 16) & 0xffff;
      const std::uint32_t nt = static_cast<std::uint32_t>(cur) & 0xffff;
      if (static_cast<std::uint32_t>(cur >> 32) != j || next >= nt) return;
      if (!ticket.compare_exchange_weak(cur, cur + (std::uint64_t{1} << 16), std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue;
      fn(ctx, static_cast<int>(next), static_cast<int>(nt));
      if (done.fetch_add(1, std::memory_order_seq_cst) + 1 == nt) wake_if_sleeping(done, caller_sleeping);
      cur = ticket.load(std::memory_order_acquire);
    }
  }

  void worker_loop(WorkerSlot& slot) {
    t_in_region = true;  // a worker only ever runs shares
#if defined(_OPENMP)
    omp_set_num_threads(1);  // OpenBLAS / oneDNN called from a share: on this thread
#endif
    std::uint32_t seen = 0;
    for (;;) {
      wait_for_change(slot.job, seen, slot.sleeping);
      seen = slot.job.load(std::memory_order_acquire);
      run_shares(seen);
    }
  }

  // With `busy` held: up to n - 1 workers exist (fewer if no more threads can be started).
  int ensure_workers(int n) {
    while (static_cast<int>(slots.size()) < n - 1) {
      auto slot = std::make_unique<WorkerSlot>();
      WorkerSlot* s = slot.get();
      try {
        std::thread([this, s] { worker_loop(*s); }).detach();
      } catch (const std::system_error&) {
        break;  // no more threads: fewer helpers, the same shares
      }
      slots.push_back(std::move(slot));
    }
    return static_cast<int>(slots.size());
  }

  void run(int nt, void (*f)(void*, int, int) noexcept, void* c) {
    const int helpers = std::min(ensure_workers(nt), nt - 1);
    const std::uint32_t j = ++job == 0 ? ++job : job;  // 0 is every worker's initial `seen`
    fn = f;
    ctx = c;
    done.store(0, std::memory_order_relaxed);
    ticket.store(ticket_of(j, 0, static_cast<std::uint32_t>(nt)), std::memory_order_seq_cst);
    for (int i = 0; i < helpers; ++i) {
      WorkerSlot& s = *slots[static_cast<std::size_t>(i)];
      s.job.store(j, std::memory_order_seq_cst);
      wake_if_sleeping(s.job, s.sleeping);
    }
    run_shares(j);
    // the shares other threads claimed
    for (std::uint32_t d = done.load(std::memory_order_acquire); d != static_cast<std::uint32_t>(nt);
         d = done.load(std::memory_order_acquire))
      wait_for_change(done, d, caller_sleeping);
  }
};

Pool* g_pool = nullptr;  // never destroyed: detached workers use it until the process ends
std::once_flag g_pool_once;

Pool& pool() {
  std::call_once(g_pool_once, [] {
    g_pool = new Pool;
    // a forked child has none of the parent's workers: it starts a pool of its own
    ::pthread_atfork(nullptr, nullptr, [] { g_pool = new Pool; });
  });
  return *g_pool;
}

// Marks the calling thread as inside a region for the share it runs, with OpenMP's thread
// count (what OpenBLAS and oneDNN use) at 1 meanwhile.
class CallerShare {
 public:
  CallerShare() {
    t_in_region = true;
#if defined(_OPENMP)
    omp_threads_ = omp_get_max_threads();
    if (omp_threads_ != 1) omp_set_num_threads(1);
#endif
  }
  ~CallerShare() {
    t_in_region = false;
#if defined(_OPENMP)
    if (omp_threads_ != 1) omp_set_num_threads(omp_threads_);
#endif
  }
  CallerShare(const CallerShare&) = delete;
  CallerShare& operator=(const CallerShare&) = delete;

 private:
  int omp_threads_ = 1;
};

}  // namespace

namespace detail {
void run_team(int threads, void (*fn)(void* ctx, int t, int nt) noexcept, void* ctx) {
  bool in_openmp = false;
#if defined(_OPENMP)
  in_openmp = omp_in_parallel() != 0;  // the caller's own OpenMP team: no nesting either
#endif
  if (threads <= 1 || t_in_region || in_openmp) {
    fn(ctx, 0, 1);
    return;
  }
  Pool& p = pool();
  std::unique_lock<std::mutex> lock(p.busy, std::try_to_lock);
  if (!lock.owns_lock()) {  // another thread's region holds the pool
    fn(ctx, 0, 1);
    return;
  }
  const CallerShare share;
  p.run(std::min(threads, kMaxShares), fn, ctx);
}
}  // namespace detail

bool in_parallel_region() { return t_in_region; }

void detail::RegionErrors::capture() noexcept {
  if (!claimed_.exchange(true, std::memory_order_acq_rel)) first_ = std::current_exception();
}

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: expected n >= 1, got " + std::to_string(n));
  g_threads = n;
  openblas_set_num_threads(n);
  Eigen::setNbThreads(1);  // Eigen runs only the products below the BLAS crossover (core/ops/matmul.cpp)
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
}

int get_num_threads() {
  int n = g_threads.load();
  if (n == 0) {
    n = initial_threads();
    g_threads = n;
  }
  return n;
}

int omp_get_thread_num_wrapper() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}
int omp_get_num_threads_wrapper() {
#if defined(_OPENMP)
  return omp_get_num_threads();
#else
  return 1;
#endif
}

}  // namespace tapegrad
