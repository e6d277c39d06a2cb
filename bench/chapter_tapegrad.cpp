// The chapter's full workload in tapegrad (the mirror of chapter_libtorch.cpp):
//   chapter_tapegrad [--threads N] [--epochs E]
// prints the wall time and the number of SGD steps.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <tapegrad/core/parallel.h>
#include "workloads.h"

int main(int argc, char** argv) {
  int threads = 1;
  tgbench::ChapterOptions o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--epochs")) o.epochs = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: chapter_tapegrad [--threads N] [--epochs E]\n");
      return 2;
    }
  }
  tapegrad::set_num_threads(threads);
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t steps = tgbench::run_chapter(o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("tapegrad chapter workload: %lld SGD steps in %.3f s (%d thread%s)\n", static_cast<long long>(steps), s,
              threads, threads == 1 ? "" : "s");
  return 0;
}
