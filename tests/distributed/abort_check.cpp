// Rank 1 throws while rank 0 waits in a collective: run_guarded must end the whole job
// with rank 1's message (ctest checks the message and bounds the run with a timeout).
#include <cstdio>
#include <stdexcept>

#include <tapegrad/distributed/environment.h>

int main(int argc, char** argv) {
  tapegrad::distributed::Environment env(&argc, &argv);
  return tapegrad::distributed::run_guarded([&] {
    if (env.rank() == 1) throw std::runtime_error("deliberate failure on rank 1");
    double x = 1;
    tapegrad::distributed::allreduce_sum(&x, 1);  // rank 0 would wait here forever
    std::printf("unreachable: the allreduce completed\n");
    return 0;
  });
}
