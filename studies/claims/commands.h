#pragma once
// The claims command line's table: one kit::Subcommand per claim, each a short description
// (its options, --quick's settings, the check, the run, the files and the summary) of the
// study in its own file. Built into the claims executable only (it needs CLI11).
#include <vector>

#include "kit/cli.h"

namespace claims {

/// Every subcommand, in the order of `claims --help`; with quick, --quick's settings are the
/// defaults (options given explicitly still win).
std::vector<studies::kit::Subcommand> commands(bool quick);

}  // namespace claims
