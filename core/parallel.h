#pragma once
// tapegrad's parallel loops run on its own small thread pool (core/parallel.cpp), whose
// threads spin briefly and then sleep while they wait: with another busy process on the
// machine, spinning threads (libgomp's default, ~300,000 spins per wait) made an epoch
// 12-60x slower. OpenBLAS and oneDNN (the OpenMP builds) run their own large kernels on
// libgomp; called from inside a tapegrad region they run on the calling thread.
//
// Every parallel region in tapegrad goes through the helpers below, so that:
//  - an exception thrown on any thread of a region (std::bad_alloc of a per-thread buffer,
//    an invalid argument found inside a loop) reaches the caller as the same exception,
//    whatever the thread count; one escaping an OpenMP region would end the process;
//  - a kernel reads the thread count once (get_num_threads()) and passes that number to
//    the region, so its per-thread buffers are sized for the team that really runs; a
//    set_num_threads() from another thread meanwhile affects the next call only.
#include <atomic>
#include <cstdint>
#include <exception>
#include <utility>
#include <tapegrad/core/shape.h>

namespace tapegrad {

/// Sets the threads used by tapegrad's loops and OpenBLAS (default: all cores). Eigen runs
/// small products on the calling thread; large ones only when OpenBLAS runs a fallback kernel
/// set (detail::blas_is_fallback()), then on these threads. Kernels running on other
/// threads when it is called finish with the count they started with.
/// Throws std::invalid_argument for n < 1.
void set_num_threads(int n);
/// Threads tapegrad's loops use (what set_num_threads set, else all cores).
int get_num_threads();

/// OpenMP's thread number and team size on the calling thread (0 and 1 outside an OpenMP
/// region, and in tapegrad's own regions, which are not OpenMP's).
int omp_get_thread_num_wrapper();
/// omp_get_num_threads() (1 without OpenMP): threads in the current parallel region.
int omp_get_num_threads_wrapper();

/// Loops smaller than this many elements run serially (a parallel region costs ~1 µs).
/// The one thread-count threshold of the kernels: parallel_for over elements, the norm
/// kernels' thread count (layers/functional/kernels/simd.h, threads_for) and, through
/// parallel_rows_grain, the loops over rows.
constexpr std::int64_t kParallelGrain = 32768;

/// The grain, in rows of `row_elems` elements, at which a parallel_for over rows goes
/// parallel: max(1, kParallelGrain / row_elems) rows (pooling's planes, GroupNorm and
/// InstanceNorm's forward rows, LocalResponseNorm's samples).
constexpr std::int64_t parallel_rows_grain(std::int64_t row_elems) {
  const std::int64_t g = kParallelGrain / (row_elems > 1 ? row_elems : 1);
  return g > 1 ? g : 1;
}

namespace detail {
/// The first exception thrown by a thread of one parallel region, rethrown on the calling
/// thread once the region has ended (an exception escaping a thread would end the process).
/// Use: `catch (...) { errors.capture(); }` around each thread's work inside the region,
/// `errors.rethrow_if_any()` after. Costs nothing while nothing throws.
class RegionErrors {
 public:
  /// Out of line (core/parallel.cpp): the per-ISA kernels (core/kernels/isa_dispatch.h) call
  /// it, and an inline copy compiled for AVX-512 could be the one the linker keeps.
  void capture() noexcept;
  /// True once some thread has failed (remaining chunks of a dynamic loop may be skipped).
  bool failed() const noexcept { return claimed_.load(std::memory_order_relaxed); }
  /// After the region (its closing join orders first_'s write before this read).
  void rethrow_if_any() {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool> claimed_{false};
  std::exception_ptr first_;
};
}  // namespace detail

namespace detail {
/// Runs fn(ctx, t, nt) once for every share t in [0, nt), nt = threads (or 1 inside another
/// region, in an OpenMP region, or while another thread's region holds the pool), on the
/// calling thread and up to nt - 1 threads of tapegrad's pool, whichever claims the share
/// first; returns when all have finished (everything they wrote is visible to the caller).
/// fn must not throw (parallel_region wraps it).
void run_team(int threads, void (*fn)(void* ctx, int t, int nt) noexcept, void* ctx);
}  // namespace detail

/// True on a thread running a share of a parallel region (tapegrad's pool): nested work
/// (a GEMM inside a region) then runs on its own thread.
bool in_parallel_region();

/// Runs body(t, nt) once for each share t of nt (nt = threads; 1 inside another region or
/// while another thread's region holds the pool), on the calling thread and tapegrad's pool
/// threads, whichever claims a share first: a body may keep per-share results, indexed by
/// t, and per-thread scratch (thread_local), but must not assume share t runs on thread t.
/// With threads <= 1, body(0, 1) on the calling thread. Rethrows the first exception a
/// share threw, after every share has finished. The pool's threads spin for a few tens of
/// microseconds waiting for work, then sleep (a busy machine loses no time to spinning
/// threads); OpenBLAS and oneDNN called from a share run on that share's thread.
template <class F>
void parallel_region(int threads, F&& body) {
  if (threads <= 1) {
    body(0, 1);
    return;
  }
  struct Ctx {
    F* body;
    detail::RegionErrors errors;
  } ctx{&body, {}};
  detail::run_team(
      threads,
      [](void* c, int t, int nt) noexcept {
        Ctx& x = *static_cast<Ctx*>(c);
        try {
          (*x.body)(t, nt);
        } catch (...) {
          x.errors.capture();
        }
      },
      &ctx);
  ctx.errors.rethrow_if_any();
}

/// Runs body(k) for k in [0, n), each once, on a team of at most `threads` threads that
/// each take the next k when done with one (dynamic scheduling: a thread slowed by another
/// job does fewer items). Exceptions: as parallel_region (the remaining items are skipped).
template <class F>
void parallel_items(std::int64_t n, int threads, F&& body) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    for (std::int64_t k = 0; k < n; ++k) body(k);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> stop{false};
  parallel_region(threads, [&](int, int) {
    try {
      for (std::int64_t k = next.fetch_add(1, std::memory_order_relaxed); k < n && !stop.load(std::memory_order_relaxed);
           k = next.fetch_add(1, std::memory_order_relaxed))
        body(k);
    } catch (...) {
      stop.store(true, std::memory_order_relaxed);
      throw;
    }
  });
}

/// Runs body(s) once for every share s in [0, shares), spread over a team of at most
/// `shares` threads: every share runs even when the team is smaller than asked for, so a
/// kernel may keep one partial result per share (sized by the `shares` it passed) and
/// merge them in share order. Exceptions: as parallel_region.
template <class F>
void parallel_shares(int shares, F&& body) {
  parallel_region(shares, [&](int t, int nt) {
    for (int s = t; s < shares; s += nt) body(s);  // nt < shares only when run on one thread
  });
}

/// Calls f(begin, end) over [0, n) split into contiguous chunks, one per thread of a team
/// of at most `threads`, in parallel when n >= grain and threads > 1. Exceptions: as
/// parallel_region.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, int threads, F&& f) {
  if (n <= 0) return;
  if (threads <= 1 || n < grain) {
    f(std::int64_t{0}, n);
    return;
  }
  parallel_region(threads, [&](int t, int nt) {
    const std::int64_t chunk = ceil_div(n, nt);
    const std::int64_t b = static_cast<std::int64_t>(t) * chunk;
    const std::int64_t e = b + chunk < n ? b + chunk : n;
    if (b < e) f(b, e);
  });
}

/// parallel_for on the configured thread count (get_num_threads(), read once).
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
  if (n <= 0) return;
  parallel_for(n, grain, get_num_threads(), std::forward<F>(f));
}

}  // namespace tapegrad
