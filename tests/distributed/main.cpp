// Catch2 main of the distributed tests: one MPI Environment around the whole run, so the
// same binary runs under `mpirun -np R` (ctest registers it so) or alone as a world of one.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <tapegrad/distributed/environment.h>

int main(int argc, char** argv) {
  tapegrad::distributed::Environment env(&argc, &argv);
  Catch::Session session;
  // only rank 0 prints the summary header noise; every rank reports its own failures
  return session.run(argc, argv);
}
