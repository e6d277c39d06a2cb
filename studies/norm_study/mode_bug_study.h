#pragma once
// `norm_study mode-bugs`: the mode-bug table measured on Fashion-MNIST. Every bug is
// reproduced in a BatchNorm MLP training (or at inference of the correctly trained net),
// scored as test accuracy against the correct loop, and each debug/ detector's verdict is
// recorded beside it. The chapter-data table (studies/mode_bugs) stays as it is.
#include <cstdint>
#include <string>
#include <vector>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"

namespace normstudy {

using namespace studies::kit;  // the kit's data, nets, job runner, checks and formats

/// Rows report mean ± std over the seeds.
struct BugOptions : studies::kit::FashionGridOptions {
  int epochs = 5;
  std::int64_t batch = 64;
  std::int64_t small_batch = 8;   ///< the biased-running-variance row's batch
  double lr = 0.05;               ///< SGD momentum 0.9 at `batch`; scaled linearly for small_batch
  int finetune_epochs = 1;        ///< the frozen-BN row's fine-tuning on shifted inputs
  std::vector<std::int64_t> hidden = {256, 128};
};
/// 1 epoch on 2,048 images, 2,000 test images, 2 seeds.
BugOptions quick_bug_options(BugOptions o);

/// One measured row: the bug, the accuracy (%) of the correct and the buggy variant on the
/// test set, and what each detector said. Labels and the detector's reading are the first
/// seed's; accuracies are kept per seed.
struct BugRow {
  std::string bug;
  std::string correct_label, buggy_label;
  double correct_accuracy = 0, buggy_accuracy = 0;  ///< percent, first seed (NaN: refused)
  std::vector<double> correct_by_seed, buggy_by_seed;  ///< percent, one per seed
  std::string detector;  ///< which detector and its reading
  bool fires = false;    ///< the detector flags the buggy variant on every seed
  bool quiet_on_correct = true;  ///< ... and stays quiet on the correct one on every seed
  int fires_seeds = 0, quiet_seeds = 0;  ///< on how many seeds each held
};
struct BugResult {
  BugOptions options;
  double baseline_accuracy = 0;  ///< the correct loop, eval mode (%), first seed
  std::vector<double> baseline_by_seed;
  std::vector<BugRow> rows;
  double seconds = 0;
};

/// Every row on each of o.seeds seeds (seed by seed; each seed's trainings in parallel on
/// o.threads workers). Throws std::invalid_argument for epochs < 1, batches < 2, seeds < 1.
BugResult run_mode_bugs(const BugOptions& o, const StudyData& data);
/// Throws std::invalid_argument naming the option: epochs, seeds >= 1, batches >= 2,
/// sizes (check_sizes), threads >= 1.
void check_bug_options(const BugOptions& o);
/// One line per (seed, bug).
std::string mode_bugs_csv(const BugResult& r);
/// Markdown: accuracies mean ± sample std over seeds (Δ paired), the first seed's detector
/// readings, fires / quiet counted over seeds.
std::string mode_bugs_summary(const BugResult& r);
std::vector<std::string> write_mode_bugs(const BugResult& r, const std::string& dir);

}  // namespace normstudy
