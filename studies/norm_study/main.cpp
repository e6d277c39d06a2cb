// norm_study: the Batch Normalization chapter's claims about batch size, synchronised
// statistics, the train/eval gap and the mode bugs, measured on Fashion-MNIST.
//   norm_study batch-size --out results/batch_size        # R = 4 replicas, m = 2..64, 6 norms, 3 seeds
//   norm_study batch-size --model cnn --out results/batch_size_cnn
//   norm_study train-eval-gap --out results/gap
//   norm_study mode-bugs --out results/mode_bugs
//   norm_study <subcommand> --quick                       # CI smoke test (< 2 minutes)
#include <malloc.h>

#include <iostream>
#include <string>

#include <spdlog/spdlog.h>

#include "commands.h"
#include "kit/cli.h"
#ifdef NORM_STUDY_MPI
#include <tapegrad/distributed/environment.h>
#endif

int main(int argc, char** argv) {
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
#ifdef NORM_STUDY_MPI
  // Started by mpirun -np R (detected from the environment): batch-size runs each replica
  // as a rank (mpi/batch_size_ranks.h); rank 0 writes the results.
  tapegrad::distributed::Environment env(&argc, &argv);
  const int world = env.world_size(), rank = env.rank();
  if (rank != 0) spdlog::set_level(spdlog::level::warn);
#else
  const int world = 1, rank = 0;
#endif
  studies::kit::CliSpec spec{"norm_study", "The Batch Normalization chapter's claims measured on Fashion-MNIST",
                             "(< 2 minutes)", {}};
#ifdef NORM_STUDY_MPI
  if (world > 1) spec.on_error = [](const std::string& m) { tapegrad::distributed::abort_job(m); };  // ranks may wait
#endif
  studies::kit::StudyCli cli(spec, normstudy::commands(studies::kit::cli_quick(argc, argv), world, rank));
  if (auto rc = cli.parse(argc, argv)) return *rc;
  if (world > 1 && cli.chosen().name != "batch-size") {
    if (rank == 0) std::cerr << "norm_study: only batch-size runs on several ranks; start this subcommand without mpirun\n";
    return 1;
  }
  return cli.run();
}
