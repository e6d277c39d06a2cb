#pragma once
// The kit's names the claims subcommands use unqualified: the number formats
// (kit/option_checks.h), mean ± std over seeds (kit/stats.h) and std::filesystem as fs.
#include <filesystem>

#include "kit/option_checks.h"
#include "kit/stats.h"

namespace claims {

using studies::kit::fmt4;
using studies::kit::fmt9;
using studies::kit::mean_std;
using studies::kit::MeanStd;
namespace fs = std::filesystem;

}  // namespace claims
