#include <tapegrad/core/parallel.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

#include <Eigen/Core>
#if defined(_OPENMP)
#include <omp.h>
#endif

extern "C" void openblas_set_num_threads(int num_threads);

namespace tapegrad {
namespace {
int initial_threads() {
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}
std::atomic<int> g_threads{0};
}  // namespace

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
