#pragma once
// One training run of the chapter's protocol: minibatch SGD on MSE, evaluation after every
// epoch, crash detection. Each run owns its generators, so runs may execute in parallel
// threads (the autograd tape is thread-local).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kit/data.h"
#include <tapegrad/models/mlp.h>

namespace studies::kit {

/// How the net is evaluated after each epoch.
///  Eval:  model.eval() under NoGradGuard; BN uses its running statistics (PyTorch practice).
///  Train: the chapter's: the net stays in train mode, so BN normalises with the statistics of
///         the whole evaluated set and its running statistics are updated by that set
///         (train split and test split alike).
enum class EvalPolicy { Eval, Train };
std::string policy_name(EvalPolicy p);          ///< "eval", "train"
EvalPolicy parse_policy(const std::string& s);  ///< throws std::invalid_argument

/// A loss above this, NaN or Inf marks a crashed run (the chapter's definition).
constexpr double kCrashLoss = 1e10;
bool is_crash_loss(double loss);

struct RunConfig {
  std::vector<std::int64_t> sizes;    ///< {in, h1, ..., out}
  tapegrad::models::Norm norm = tapegrad::models::Norm::None;
  double lr = 0.01;                   ///< plain SGD, no momentum
  int epochs = 200;
  std::int64_t batch = 32;            ///< the remainder of each epoch is dropped
  double bn_momentum = 0.01;          ///< PyTorch convention; decay 0.99 = momentum 0.01
  std::optional<double> grad_clip;    ///< clamp every gradient element to [-c, c] before the step
  std::optional<double> act_clip;     ///< clamp every hidden activation to [-c, c]
  /// Policies to evaluate with. With both, each epoch is evaluated in eval mode, then in
  /// train mode with the BN buffers restored afterwards, so the training is shared and
  /// both reported curves are exactly what a run with that single policy would report.
  std::vector<EvalPolicy> policies{EvalPolicy::Eval};
  std::uint64_t seed = 0;             ///< data, weights and batch order all derive from it

  /// Number of Linear layers.
  int depth() const { return static_cast<int>(sizes.size()) - 1; }
  /// Identity of the computation (two configs with equal keys train identically).
  std::string key() const;
};

struct RunResult {
  /// loss[p][s][e]: policy index p (as in RunConfig::policies), split s (0 train, 1 test),
  /// epoch e + 1. Shorter than `epochs` when the run crashed.
  std::vector<std::array<std::vector<double>, 2>> loss;
  bool crashed = false;
  int crash_epoch = 0;            ///< 1-based epoch of the crash, 0 if none
  std::string crash_reason;       ///< e.g. "minibatch loss inf at epoch 3, step 2"
  std::int64_t steps = 0;         ///< SGD steps taken
  double seconds = 0;             ///< wall time of the run
  std::shared_ptr<tapegrad::models::MLP> model;  ///< the trained net
  int epochs_done() const { return loss.empty() ? 0 : static_cast<int>(loss[0][0].size()); }
};

/// Trains one net on `data` as the config says. Deterministic: same config and data give
/// the same bits. Throws std::invalid_argument for batch < 1, batch > n_train, epochs < 0,
/// an empty policy list or a bad net description.
RunResult train_run(const RunConfig& cfg, const Dataset& data);

/// Loss of `model` on (x, y) under `policy` (see EvalPolicy), without recording a tape.
/// Train policy updates BN running statistics, as the chapter's evaluation does.
double evaluate(tapegrad::models::MLP& model, const tapegrad::Tensor& x, const tapegrad::Tensor& y,
                EvalPolicy policy);

/// The MLP options a config trains with (to rebuild a saved net before loading it).
tapegrad::models::MLPOptions mlp_options(const RunConfig& cfg);

}  // namespace studies::kit
