// Catch2 main of the trainer's data-parallel tests: one MPI Environment around the run, so
// the binary runs under `mpirun -np R` (as ctest registers it) or alone as a world of one.
// A failing rank ends the whole job (run_guarded), so no rank waits in a collective forever.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <spdlog/spdlog.h>

#include <tapegrad/distributed/environment.h>

int main(int argc, char** argv) {
  tapegrad::distributed::Environment env(&argc, &argv);
  spdlog::set_level(spdlog::level::warn);  // the trainer's per-epoch log, on every rank
  return tapegrad::distributed::run_guarded([&] { return Catch::Session().run(argc, argv); });
}
