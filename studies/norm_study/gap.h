#pragma once
// `norm_study train-eval-gap`: the chapter's "inconsistency between training and inference".
// A BatchNorm MLP is trained with SGD; after every epoch the test set is scored twice: in
// train mode (batch statistics of consecutive training-size batches, buffers restored
// afterwards) and in eval mode (running statistics). The gap is eval − train, for BN
// momentum 0.01, 0.1 and cumulative (None), with the lr dropped ×0.1 late in training.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"

namespace normstudy {

using namespace studies::kit;  // the kit's data, nets, job runner, checks and formats

struct GapOptions : studies::kit::FashionGridOptions {
  std::vector<std::optional<double>> momenta = {0.01, 0.1, std::nullopt};
  int epochs = 10;
  int drop_epoch = 8;             ///< the lr is ×0.1 from epoch drop_epoch + 1 on (0 = never)
  std::int64_t batch = 64;
  double lr = 0.05;               ///< SGD, momentum 0.9
  std::vector<std::int64_t> hidden = {256, 128};
};
GapOptions quick_gap_options(GapOptions o);

struct GapPoint {
  int epoch = 0;
  double lr = 0;
  Eval train_mode, eval_mode;  ///< on the test set
};
struct GapRun {
  std::optional<double> momentum;
  std::uint64_t seed = 0;
  std::vector<GapPoint> points;  ///< one per epoch
};
/// runs: momentum-major, then seed.
using GapResult = studies::kit::GridResult<GapOptions, GapRun>;

/// Throws std::invalid_argument naming the option: seeds, epochs >= 1, drop epoch 0 (never)
/// or 1 .. epochs - 1, batch in 2..train size, lr finite > 0, sizes (check_sizes), threads >= 1.
void check_gap_options(const GapOptions& o);
/// Checks the options (check_gap_options), then trains every (momentum, seed).
GapResult run_gap(const GapOptions& o, const StudyData& data);
std::string momentum_name(const std::optional<double>& m);
std::string gap_csv(const GapResult& r);
std::string gap_summary(const GapResult& r);
std::vector<std::string> write_gap(const GapResult& r, const std::string& dir);

}  // namespace normstudy
