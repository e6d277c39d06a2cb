#include <tapegrad/distributed/ddp_profile.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace tapegrad::distributed::detail {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void Profile::restart() {
  mark_wall_ = wall_seconds();
  mark_cpu_ = thread_cpu_seconds();
}

void Profile::charge() {
  const double w = wall_seconds(), c = thread_cpu_seconds();
  wall[current] += w - mark_wall_;
  cpu[current] += c - mark_cpu_;
  mark_wall_ = w;
  mark_cpu_ = c;
}

void Profile::print(int rank) const {
  if (!on || steps == 0) return;
  std::string line = "rank " + std::to_string(rank) + ": DDP profile over " + std::to_string(steps) +
                     " steps, ms per step wall/CPU:";
  char buf[96];
  for (int k = 0; k < kPhases; ++k) {
    std::snprintf(buf, sizeof buf, " %s %.3f/%.3f", kNames[k], 1e3 * wall[k] / steps, 1e3 * cpu[k] / steps);
    line += buf;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace tapegrad::distributed::detail
