#pragma once
// Outputs of a study: tidy CSV, Markdown summary, gnuplot figures.
#include <string>
#include <vector>

#include "kit/gnuplot.h"  // studies::kit: gnuplot without a shell
#include "kit/stats.h"
#include "study.h"

namespace bnexp {

/// Header of the tidy CSV: one row per (experiment, config, policy, seed, epoch, split).
inline constexpr const char* kCsvHeader = "experiment,config,norm,lr,depth,preset,policy,seed,epoch,split,loss";

/// The CSV text (header + rows, "\n" line ends, losses as %.9g). No timings, so the same
/// options give byte-identical text.
std::string csv_text(const StudyResult& s);

/// Final-loss statistics of one (experiment, config, policy) over its seeds.
struct ConfigSummary {
  std::string experiment, config;
  tapegrad::models::Norm norm;
  double lr;
  int depth;
  EvalPolicy policy;
  int runs = 0, crashed = 0;
  MeanStd final_train, final_test, best_test;  ///< over the runs that did not crash
  MeanStd epochs_to_target;                    ///< over the runs that reached the target
  int reached_target = 0;
  double rise_fraction = 0;  ///< mean over non-crashed runs of stats.h's rise_fraction (train)
};
/// One entry per (experiment, config, policy) in job order.
std::vector<ConfigSummary> summarize(const StudyResult& s);

/// The Markdown summary: settings, then one table per experiment and policy.
std::string summary_markdown(const StudyResult& s);

/// Writes results.csv and summary.md into `dir` (created if missing; each file replaced
/// atomically, core/file_io.h), then the figures
/// (PNG, gnuplot) and their data under dir/plots. Returns the PNG paths written; when
/// gnuplot is not on PATH it logs a warning once and returns none (the CSV is still there).
/// Throws std::runtime_error when a file cannot be written.
std::vector<std::string> write_outputs(const StudyResult& s, const std::string& dir);

}  // namespace bnexp
