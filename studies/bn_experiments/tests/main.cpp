#define CATCH_CONFIG_RUNNER
#include <malloc.h>

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  // As in the CLI: keep freed memory instead of trimming the heap after every step.
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  spdlog::set_level(spdlog::level::warn);
  return Catch::Session().run(argc, argv);
}
