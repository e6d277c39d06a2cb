#pragma once
// `claims hessian`: the Hessian spectrum of the training loss over training (Ghorbani,
// Krishnan & Xiao 2019, "An investigation into neural net optimization via Hessian eigenvalue
// density"; Santurkar et al. 2018 §3 for smoothness). At chosen SGD steps the full-batch (or a
// fixed subset's) loss Hessian is probed (hessian_probe.h): λ_max, the outliers beyond the SLQ
// bulk edge and the share of the gradient's energy in the top-k eigenspace, on the chapter's
// MLP (regression, 50-128-64-32-1, MSE; studies/kit/training.h) and the Fashion-MNIST MLP
// (784-256-128-10, cross-entropy), float64, seeds 0–2.
// Arms (hessian_nets.h): `plain` (no BatchNorm); `bn` (BatchNorm1d after each hidden Linear,
// batch statistics; its Hessian in train mode on the Hessian set cut into chunks of the SGD
// batch size, running statistics untouched); `bn-population` (Ghorbani et al. §4's control:
// BN normalising with the whole training set's statistics, recomputed every
// `population_every` steps, constants in the loss and its Hessian).
#include <cstdint>
#include <string>
#include <vector>

#include "hessian_nets.h"
#include "hessian_probe.h"
#include "kit/fashion_data.h"
#include "kit/training_options.h"

namespace claims {

struct HessianNetOptions {
  std::string name;                    ///< "chapter" or "fashion"
  std::vector<std::int64_t> hidden;    ///< hidden widths (ReLU after each)
  double lr = 0.05;                    ///< plain SGD (no momentum)
  std::int64_t batch = 32;             ///< minibatch of the SGD steps
  std::int64_t hessian_batch = 0;      ///< first rows of the training set the Hessian is taken on (0: all)
};

struct HessianOptions : studies::kit::SeedOptions {
  std::vector<std::int64_t> steps = {0, 10, 100, 1000, 2000};  ///< probe after this many SGD steps (the last: the end)
  std::vector<std::string> nets = {"chapter", "fashion"};
  std::vector<std::string> arms = {"plain", "bn", "bn-population"};
  std::int64_t population_every = 10;  ///< bn-population: SGD steps between recomputations of the statistics
  HessianNetOptions chapter{"chapter", {128, 64, 32}, 0.05, 32, 0};
  HessianNetOptions fashion{"fashion", {256, 128}, 0.05, 128, 1000};
  std::int64_t train_size = 10000;  ///< Fashion-MNIST training images (the chapter's set is its 200)
  /// top 20 by 60 Lanczos steps (room above the one outlier per class that Ghorbani et al. see),
  /// SLQ 8 probes × 60 steps, σ = 1 % of the range
  SpectrumOptions spectrum{20, 60, {8, 60, 1000}, 0.01, 0};
};
/// --quick: every arm, 1 seed, steps {0, 10}, Fashion-MNIST on 512 images with hidden {32, 16} and a
/// 128-image Hessian batch, top-5, SLQ 2 probes × 20 steps.
HessianOptions quick_hessian_options(HessianOptions o);
/// Throws std::invalid_argument naming the option (an unknown arm or net, steps not increasing
/// from >= 0, sizes out of range, fewer than 1 seed, thread or --population-every step).
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
/// The tables per net and arm and the verdicts on Ghorbani et al.'s findings 1-3 and Santurkar
/// et al.'s smaller λ_max with BN, each with its rule and margin (hessian_summary.cpp).
std::string hessian_summary(const HessianResult& r);
/// results.csv, summary.md, density.csv and one density figure per net and arm (seed o.seed),
/// hessian_density_<net>_<arm>.png.
std::vector<std::string> write_hessian(const HessianResult& r, const std::string& dir);

}  // namespace claims
