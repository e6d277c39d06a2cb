#pragma once
// The norm_study command line's table: batch-size, train-eval-gap and mode-bugs as
// kit::Subcommand descriptions of the studies in batch_size.h, gap.h and mode_bug_study.h.
// Built into the norm_study executable only (it needs CLI11).
#include <vector>

#include "kit/cli.h"

namespace normstudy {

/// Every subcommand; with quick, --quick's settings (batch-size: those of the flags not given,
/// after --model cnn's defaults). `world` and `rank`: the MPI job (1 and 0 without mpirun);
/// with world > 1 batch-size runs its replicas as the ranks (--replicas defaults to world) and
/// only rank 0 writes.
std::vector<studies::kit::Subcommand> commands(bool quick, int world, int rank);

}  // namespace normstudy
