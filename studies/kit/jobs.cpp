#include "kit/jobs.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/core/parallel.h>
#include "kit/option_checks.h"

namespace studies::kit {

void check_threads(int threads) {
  studies::kit::check_at_least("--threads", threads, 1);
}

void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  if (threads < 1) throw std::invalid_argument("--threads must be >= 1, got " + std::to_string(threads));
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex mu;
  auto worker = [&] {
    tapegrad::set_num_threads(1);
    for (;;) {
      const std::size_t k = next.fetch_add(1);
      if (k >= n) return;
      try {
        fn(k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  const int before = tapegrad::get_num_threads();
  const int t = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  if (t == 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int i = 0; i < t; ++i) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
  tapegrad::set_num_threads(before);
  if (error) std::rethrow_exception(error);
}

}  // namespace studies::kit
