#pragma once
// The studies' job runner: the runs of a grid on worker threads, each single-threaded.
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

namespace studies::kit {

/// Throws std::invalid_argument naming --threads unless threads >= 1.
void check_threads(int threads);
/// Runs fn(0..n-1) on `threads` worker threads, each single-threaded inside
/// (tapegrad::set_num_threads(1)), so a job's bits never depend on `threads`. Rethrows the
/// first exception.
void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& fn);

/// The runs of a study's grid: one_run(runs[k]) for every k through run_jobs (each run on a
/// single-threaded worker, so its bits never depend on `threads`). Returns the wall time in
/// seconds. Throws as run_jobs does.
template <class Run, class F>
double run_grid(std::vector<Run>& runs, int threads, F&& one_run) {
  const auto t0 = std::chrono::steady_clock::now();
  run_jobs(runs.size(), threads, [&](std::size_t k) { one_run(runs[k]); });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A grid study's result: the options it ran with, its runs in grid order and the wall time
/// in seconds (run_grid's).
template <class Options, class Run>
struct GridResult {
  Options options;
  std::vector<Run> runs;
  double seconds = 0;
};

}  // namespace studies::kit
