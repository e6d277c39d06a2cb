#pragma once
// `claims init-sweep-linear`: "BN reduces initialization sensitivity" on Santurkar et al.'s
// deep linear network (deep_linear.h) with `depth` Linear(10, 10) layers, the Glorot bound
// multiplied by s, full-batch GD at lr 1e-6 for `steps` steps, BN vs plain. The score is the
// variance explained R² = 1 − L/Σy² (L the final summed squared error, Σy² the loss of
// predicting 0), clamped to [0, 1], in points; a crashed run scores 0. The region within
// `tolerance` points of each net's best cell and its share of the grid, as in init_sweep.h.
#include <string>
#include <vector>

#include "deep_linear.h"
#include "init_sweep.h"

namespace claims {

struct InitLinearOptions {
  std::vector<double> scales = {0.01, 0.1, 0.3, 1, 3, 10};
  std::vector<int> depths = {2, 4, 8, 16};
  int steps = 1000;
  double tolerance = 2;
  LinearOptions linear;  ///< width, samples, lr, seeds, seed, threads
};
/// --quick: 2 seeds, 100 steps, scales {0.1, 1, 10}, depths {2, 4}.
InitLinearOptions quick_init_linear_options(InitLinearOptions o);
/// Throws std::invalid_argument naming the option.
void check_init_linear_options(const InitLinearOptions& o);
/// The result in init_sweep.h's form (acc = R²), for init_summary / write_init.
InitResult run_init_sweep_linear(const InitLinearOptions& o);

}  // namespace claims
