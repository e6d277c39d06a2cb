#pragma once
// `claims hessian`: the Hessian spectrum of the training loss over training (Ghorbani,
// Krishnan & Xiao 2019, "An investigation into neural net optimization via Hessian eigenvalue
// density"; Santurkar et al. 2018 §3 for smoothness). At chosen SGD steps the full-batch (or a
// fixed subset's) loss Hessian is probed (hessian_probe.h): λ_max, the outliers beyond the SLQ
// bulk edge and the share of the gradient's energy in the top-k eigenspace, on the chapter's
// MLP (regression, 50-128-64-32-1, MSE; studies/kit/training.h) and the Fashion-MNIST MLP
// (784-256-128-10, cross-entropy), float64, seeds 0–2.
// Arms: `plain` (no BatchNorm). The BatchNorm arms (batch statistics, and Ghorbani's control
// normalising with population statistics) need BatchNorm1d's double backward and are not built
// here yet; --arms names them and is refused with that reason.
#include <cstdint>
#include <string>
#include <vector>

#include "hessian_probe.h"
#include "kit/fashion_data.h"

namespace claims {

struct HessianNetOptions {
  std::string name;                    ///< "chapter" or "fashion"
  std::vector<std::int64_t> hidden;    ///< hidden widths (ReLU after each)
  double lr = 0.05;                    ///< plain SGD (no momentum)
  std::int64_t batch = 32;             ///< minibatch of the SGD steps
  std::int64_t hessian_batch = 0;      ///< first rows of the training set the Hessian is taken on (0: all)
};

struct HessianOptions {
  std::vector<std::int64_t> steps = {0, 10, 100, 1000, 2000};  ///< probe after this many SGD steps (the last: the end)
  std::vector<std::string> nets = {"chapter", "fashion"};
  std::vector<std::string> arms = {"plain"};
  int seeds = 3;
  std::uint64_t seed = 0;
  HessianNetOptions chapter{"chapter", {128, 64, 32}, 0.05, 32, 0};
  HessianNetOptions fashion{"fashion", {256, 128}, 0.05, 128, 1000};
  std::int64_t train_size = 10000;  ///< Fashion-MNIST training images (the chapter's set is its 200)
  /// top 20 by 60 Lanczos steps (room above the one outlier per class that Ghorbani et al. see),
  /// SLQ 8 probes × 60 steps, σ = 1 % of the range
  SpectrumOptions spectrum{20, 60, {8, 60, 1000}, 0.01, 0};
  int threads = 2;
};
/// --quick: 1 seed, steps {0, 10}, Fashion-MNIST on 512 images with hidden {32, 16} and a
/// 128-image Hessian batch, top-5, SLQ 2 probes × 20 steps.
HessianOptions quick_hessian_options(HessianOptions o);
/// Throws std::invalid_argument naming the option (an unknown or not yet available arm or net,
/// steps not increasing from >= 0, sizes out of range, fewer than 1 seed or thread).
void check_hessian_options(const HessianOptions& o);

struct HessianPoint {
  std::string net, arm;
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  std::int64_t params = 0;
  double loss = 0;        ///< the loss the Hessian is taken of
  SpectrumProbe probe;
};
struct HessianResult {
  HessianOptions options;
  std::vector<HessianPoint> points;
  double seconds = 0;
};

/// `d` is used only when options.nets contains "fashion".
HessianResult run_hessian(const HessianOptions& o, const studies::kit::StudyData& d);
std::string hessian_csv(const HessianResult& r);
std::string hessian_summary(const HessianResult& r);
/// results.csv, summary.md, density.csv and one density figure per net (seed o.seed).
std::vector<std::string> write_hessian(const HessianResult& r, const std::string& dir);

}  // namespace claims
