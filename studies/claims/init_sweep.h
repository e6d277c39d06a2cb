#pragma once
// `claims init-sweep`: "BN reduces initialization sensitivity". The Fashion-MNIST MLP with
// `depth` hidden layers of `width` units (Linear -> [BN] -> ReLU), weights N(0, (s·√(2/fan_in))²)
// — s × the Kaiming (He) std — and zero bias, for s on a grid and depth on a grid, BN vs
// plain, at one fixed learning rate (SGD momentum 0.9) on a subset of the data. Per net: the
// cells (s, depth) whose mean test accuracy is within `tolerance` points of that net's best
// cell, and their share of the grid as one "initialization sensitivity" number (a larger
// share: less sensitive); per seed too, paired BN − plain. A crashed run (loss NaN, Inf or
// > 1e10) counts as chance (10 %).
#include <cstdint>
#include <string>
#include <vector>

#include "mlp.h"
#include "kit/training_options.h"

namespace claims {

struct InitOptions : studies::kit::FashionGridOptions {
  std::vector<double> scales = {0.01, 0.1, 0.3, 1, 3, 10};
  std::vector<int> depths = {2, 4, 8, 16};
  std::int64_t width = 128;
  int epochs = 2;
  std::int64_t batch = 64;
  double lr = 0.01;
  double tolerance = 2;  ///< points of test accuracy
};
/// --quick: 1 seed, scales {0.1, 1, 10}, depths {2, 4}, 1 epoch on 1,024 / 1,000 images.
InitOptions quick_init_options(InitOptions o);
/// Throws std::invalid_argument naming the option.
void check_init_options(const InitOptions& o);

struct InitRun : studies::kit::BnVsPlainRun {
  double scale = 0;
  int depth = 0;
  TrainOutcome out;
  double crash_acc = 0.1;  ///< the score a crashed run counts as
  double acc() const;  ///< test accuracy (init-sweep-linear: R²), crash_acc when crashed
};
struct InitResult {
  InitOptions options;
  std::vector<InitRun> runs;  ///< net, depth, scale, seed
  double seconds = 0;
  /// Other nets reusing the summary and figure (init-sweep-linear): the set-up bullets that
  /// replace the MLP's, the figure title's first words and the score's name.
  std::string description, figure_name = "Fashion-MNIST MLP", score = "test accuracy", scale_name = "Kaiming std";
  double floor = 10;  ///< the colour scale's lower end (chance)
};

InitResult run_init_sweep(const InitOptions& o, const studies::kit::StudyData& d);
std::string init_csv(const InitResult& r);
std::string init_summary(const InitResult& r);
std::vector<std::string> write_init(const InitResult& r, const std::string& dir);

}  // namespace claims
