#pragma once
// One thread pool for everything: tapegrad's own loops run on OpenMP, and OpenBLAS is
// the OpenMP build, so both share libgomp's pool instead of oversubscribing the cores.
#include <cstdint>

namespace tapegrad {

/// Sets the threads used by tapegrad's loops and OpenBLAS (default: all cores). Eigen runs
/// small products on the calling thread; large ones only when OpenBLAS runs a fallback kernel
/// set (detail::blas_is_fallback()), then on these threads.
/// Throws std::invalid_argument for n < 1.
void set_num_threads(int n);
/// Threads tapegrad's loops use (what set_num_threads set, else all cores).
int get_num_threads();

/// omp_get_thread_num() (0 without OpenMP): this thread's index in a parallel region.
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

/// Calls f(begin, end) over [0, n) split into contiguous chunks, in parallel when
/// n >= grain and more than one thread is configured.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
  if (n <= 0) return;
  const int threads = get_num_threads();
  if (threads <= 1 || n < grain) {
    f(std::int64_t{0}, n);
    return;
  }
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num_wrapper();
    const int nt = omp_get_num_threads_wrapper();
    const std::int64_t chunk = (n + nt - 1) / nt;
    const std::int64_t b = t * chunk;
    const std::int64_t e = b + chunk < n ? b + chunk : n;
    if (b < e) f(b, e);
  }
#else
  f(std::int64_t{0}, n);
#endif
}

}  // namespace tapegrad
