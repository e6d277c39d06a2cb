#pragma once
// The studies' job runner: the runs of a grid on worker threads, each single-threaded.
#include <cstddef>
#include <functional>

namespace studies::kit {

/// Throws std::invalid_argument naming --threads unless threads >= 1.
void check_threads(int threads);
/// Runs fn(0..n-1) on `threads` worker threads, each single-threaded inside
/// (tapegrad::set_num_threads(1)), so a job's bits never depend on `threads`. Rethrows the
/// first exception.
void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& fn);

}  // namespace studies::kit
