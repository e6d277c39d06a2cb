#include "init_linear.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"

namespace claims {

using studies::kit::fmt4;
using studies::kit::fmt9;

InitLinearOptions quick_init_linear_options(InitLinearOptions o) {
  o.linear.seeds = 2;
  o.steps = 100;
  o.scales = {0.1, 1, 10};
  o.depths = {2, 4};
  return o;
}

void check_init_linear_options(const InitLinearOptions& o) {
  if (o.scales.empty()) throw std::invalid_argument("--scales: expected at least one scale, got none");
  if (o.depths.empty()) throw std::invalid_argument("--depths: expected at least one depth, got none");
  for (int dd : o.depths)  // as --depth of deep-linear: each layer is a width x width weight
    if (dd < 2 || dd > 10000)
      throw std::invalid_argument("--depths: expected Linear counts 2 to 10000, got " + std::to_string(dd));
  if (!(o.tolerance >= 0 && std::isfinite(o.tolerance)))  // inf: every cell "good"
    throw std::invalid_argument("--tolerance: expected points >= 0, got " + fmt9(o.tolerance));
  for (double s : o.scales) {
    LinearOptions l = o.linear;
    l.steps = o.steps;
    l.init_scale = s;
    check_linear_options(l);
  }
}

InitResult run_init_sweep_linear(const InitLinearOptions& o) {
  check_init_linear_options(o);
  InitResult r;
  r.options.scales = o.scales;
  r.options.depths = o.depths;
  r.options.width = o.linear.width;
  r.options.seeds = o.linear.seeds;
  r.options.seed = o.linear.seed;
  r.options.lr = o.linear.lr;
  r.options.tolerance = o.tolerance;
  r.options.threads = o.linear.threads;
  r.figure_name = "Deep linear network";
  r.score = "R² (variance explained)";
  r.scale_name = "Glorot bound";
  r.floor = 0;
  std::ostringstream desc;
  desc << "- Santurkar et al.'s deep linear network with depth Linear(" << o.linear.width << ", " << o.linear.width
       << ") layers, Glorot uniform bound × s, " << o.linear.samples << " samples, full-batch GD lr " << fmt9(o.linear.lr)
       << ", " << o.steps << " steps, summed squared error, float64; bn: BatchNorm1d after each Linear but the last\n"
       << "- score: R² = 1 − L/Σy² of the final loss, clamped to [0, 1], in points; a crashed run (loss NaN, Inf or > 1e10) "
          "scores 0\n";
  r.description = desc.str();
  const auto t0 = std::chrono::steady_clock::now();
  for (int dd : o.depths)
    for (double s : o.scales) {
      LinearOptions l = o.linear;
      l.depth = dd;
      l.init_scale = s;
      l.steps = o.steps;
      l.every = o.steps;
      const LinearResult lr = run_deep_linear(l, false, false);
      for (const auto& x : lr.runs) {
        InitRun run;
        run.bn = x.bn, run.depth = dd, run.scale = s, run.seed = x.seed;
        run.crash_acc = 0;
        run.out.crashed = x.crashed;
        run.out.first_loss = x.loss.empty() ? 0 : x.loss.front().second;
        run.out.last_epoch_loss = x.crashed ? NAN : x.loss.back().second;
        run.out.test_acc = x.crashed ? NAN : std::clamp(1 - x.loss.back().second / x.target_ss, 0.0, 1.0);
        run.out.train_acc = run.out.test_acc;
        r.runs.push_back(run);
      }
    }
  // Order as run_init_sweep: net, depth, scale, seed.
  std::stable_sort(r.runs.begin(), r.runs.end(), [](const InitRun& a, const InitRun& b) { return a.bn < b.bn; });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace claims
