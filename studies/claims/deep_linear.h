#pragma once
// Santurkar, Tsipras, Ilyas & Madry 2018 ("How Does Batch Normalization Help Optimization?",
// NeurIPS), their deep linear network: 25 Linear(10, 10) layers without bias, Glorot (uniform)
// init, X (1000, 10) ~ N(0, 1), y = x·Aᵀ with A a 10×10 standard Gaussian matrix, full-batch
// gradient descent at lr 1e-6 for 10,000 steps on the squared error (summed over samples and
// outputs), float64; with BN (BatchNorm1d, PyTorch defaults) after each of the first 24
// Linears, or plain. The output layer has no BN: a normalised output could not reach the
// targets' scale.
//
//   ics        their Definition 2.1: at every k-th step, per Linear i, G = ∇_{W_i} L on the
//              batch; then, on a copy, the same gradient step applied to every parameter of
//              the layers before i only; G' = ∇_{W_i} L on the same batch; ‖G − G'‖₂ and
//              cos(G, G'). BN layers stay in train mode; their running statistics are
//              snapshotted and restored, so the probe changes nothing.
//   landscape  at every k-th step, with g the full gradient, for η on a geometric grid over
//              [0.01, 30]× lr: L(W − ηg) (the loss band min–max), the gradient predictiveness
//              ‖∇L(W) − ∇L(W − ηg)‖₂ (band min–max) and the effective β-smoothness
//              max_η ‖∇L(W) − ∇L(W − ηg)‖₂ / ‖ηg‖₂.
#include <cstdint>
#include <string>
#include <vector>

#include "distribution_noise.h"
#include "flat_grads.h"
#include "kit/training_options.h"

namespace claims {

struct LinearOptions : studies::kit::SeedOptions {
  int depth = 25;
  std::int64_t width = 10;
  std::int64_t samples = 1000;
  double lr = 1e-6;
  int steps = 10000;
  int every = 100;             ///< probe every k-th step (and at step 0)
  int grid = 9;                ///< landscape: η values, geometric over [eta_min, eta_max]× lr
  double eta_min = 0.01, eta_max = 30;
  double init_scale = 1;       ///< multiplies the Glorot bound (init-sweep-linear)
};
LinearOptions quick_linear_options(LinearOptions o);

/// The noise experiment's runs (noisy-bn): plain, plain + noise, bn, bn + noise, each for every
/// seed of `o` in seed order. Run has bn, noise and seed.
template <class Run>
std::vector<Run> noise_grid(const studies::kit::SeedOptions& o) {
  std::vector<Run> runs;
  for (bool bn : {false, true})
    for (bool noise : {false, true}) {
      Run cell;
      cell.bn = bn;
      cell.noise = noise;
      studies::kit::add_seed_runs(runs, cell, o);
    }
  return runs;
}
/// Throws std::invalid_argument naming the option.
void check_linear_options(const LinearOptions& o);

/// One probe of one net at one step.
struct IcsPoint {
  int step = 0;
  std::vector<double> l2, rel, cos;  ///< per Linear i (0-based): ‖G − G'‖₂, ‖G − G'‖₂/‖G‖₂, cos(G, G')
  /// Appends the next Linear's measures: G = g before, G' = gp after the earlier layers' step.
  void add_layer(const std::vector<double>& g, const std::vector<double>& gp);
};
struct LandscapePoint {
  int step = 0;
  double loss = 0;
  double loss_min = 0, loss_max = 0;    ///< over η of L(W − ηg)
  double gpred_min = 0, gpred_max = 0;  ///< over η of ‖∇L(W) − ∇L(W − ηg)‖₂
  double beta = 0;                      ///< max over η of ‖Δ∇L‖₂ / ‖ηg‖₂
  double grad_norm = 0;                 ///< ‖g‖₂
  /// Before the first η: ‖g‖₂ = g_norm, the ranges empty (min +∞, max −∞).
  void begin(double g_norm);
  /// Folds in one step size η: loss_eta = L(W − ηg), grad_dist = ‖∇L(W) − ∇L(W − ηg)‖₂.
  void add(double eta, double loss_eta, double grad_dist);
};
struct LinearRun : studies::kit::BnVsPlainRun {
  bool noise = false;  ///< DistributionNoise after each of the first depth − 1 Linears (after its BN)
  bool crashed = false;
  int crash_step = 0;
  std::vector<std::pair<int, double>> loss;  ///< (step, loss) at every probe step
  double target_ss = 0;  ///< Σ y² over samples and outputs: the loss of predicting 0
  std::vector<std::pair<int, double>> clean_loss;  ///< noise runs: the same with the noise off (BN still on the batch)
  std::vector<IcsPoint> ics;
  std::vector<LandscapePoint> landscape;
};
struct LinearResult {
  LinearOptions options;
  bool ics = false, landscape = false;  ///< which probes ran
  std::vector<LinearRun> runs;          ///< plain then BN, each for every seed
  double seconds = 0;
  /// Other nets reusing the summaries and figures (mlp_probes.h): the set-up bullet that
  /// replaces the deep linear network's, and the figure titles' first words.
  std::string description, figure_name = "Deep linear network";
};

/// Trains every (net, seed) with the probes asked for (ics, landscape).
LinearResult run_deep_linear(const LinearOptions& o, bool ics, bool landscape);
/// `noisy-bn`: plain, plain + noise, BN, BN + noise (Santurkar et al. Algorithm 1 after each
/// of the first depth − 1 Linears, after the BN), every seed, no probes; loss and clean_loss
/// every `every` steps. Noise layer j of seed s draws from Generator(1000·s + 500 + j).
LinearResult run_noisy_linear(const LinearOptions& o, const NoiseOptions& noise);
std::string ics_csv(const LinearResult& r);
std::string landscape_csv(const LinearResult& r);
std::string ics_summary(const LinearResult& r);
std::string landscape_summary(const LinearResult& r);
std::vector<std::string> write_ics(const LinearResult& r, const std::string& dir);
std::vector<std::string> write_landscape(const LinearResult& r, const std::string& dir);

}  // namespace claims
