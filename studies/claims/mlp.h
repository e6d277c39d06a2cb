#pragma once
// The Fashion-MNIST MLP the newer claims studies share: 784 -> [Linear -> (BN) -> (noise) ->
// ReLU] per hidden width -> Linear(10), with a weight scale for the initialization sweep and
// the per-layer parameter groups the ICS probe steps.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distribution_noise.h"
#include <tapegrad/core/random.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>

namespace claims {

struct MlpSpec {
  std::vector<std::int64_t> hidden = {256, 128};
  bool bn = false;                      ///< BatchNorm1d (PyTorch defaults) after each hidden Linear
  std::optional<NoiseOptions> noise;    ///< DistributionNoise after each hidden Linear (after its BN)
  std::uint64_t noise_seed = 0;         ///< noise layer k draws from Generator(noise_seed + k)
  /// 0: PyTorch's default Linear init (Kaiming uniform a = √5, bias U(±1/√fan_in)). > 0: weights
  /// N(0, (scale·√(2/fan_in))²) — scale × the Kaiming (He) std for ReLU — and bias 0.
  double weight_scale = 0;
  /// The command-line options that set `hidden`, as build_mlp's errors name them (e.g.
  /// "--width 512 (--depths 4)"); empty: "--hidden <the widths>".
  std::string hidden_option;
};

struct Mlp {
  std::shared_ptr<tapegrad::layers::Sequential> net;
  std::vector<std::shared_ptr<tapegrad::layers::Linear>> linears;
  std::vector<std::shared_ptr<tapegrad::layers::BatchNorm1d>> bns;
  std::vector<std::shared_ptr<DistributionNoise>> noises;
  /// groups[i]: Linear i's weight and bias, then its BN's γ and β (the parameters of "layer i").
  std::vector<std::vector<tapegrad::Tensor>> groups;
};

/// Weights from `init` in layer order, so nets that differ only in BN or noise start equal.
/// Throws std::invalid_argument for an empty or non-positive width or a negative scale.
Mlp build_mlp(const MlpSpec& s, std::int64_t in_features, std::int64_t classes, tapegrad::Generator& init);

}  // namespace claims

#include <functional>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"

namespace claims {

struct TrainSpec {
  int epochs = 5;
  std::int64_t batch = 64;
  double lr = 0.05;
  double momentum = 0.9;
  std::uint64_t shuffle_seed = 0;  ///< the DataLoader's Generator
};
struct TrainOutcome {
  bool crashed = false;           ///< a minibatch loss NaN, Inf or > 1e10 (studies::kit::crashed_loss)
  std::int64_t crash_step = 0;
  double first_loss = 0;          ///< first minibatch loss
  double last_epoch_loss = 0;     ///< mean minibatch loss of the last epoch (train mode)
  double train_acc = 0, test_acc = 0;  ///< eval mode; NaN when crashed
};
/// SGD (momentum `momentum`) on cross-entropy, shuffled batches, the remainder dropped.
/// `before_step(step, X, y)`, when set, runs before every optimizer step at the current
/// weights (step counts from 0); it must leave the net as it found it.
TrainOutcome train_mlp(Mlp& m, const TrainSpec& t, const studies::kit::StudyData& d,
                       const std::function<void(std::int64_t, const tapegrad::Tensor&, const tapegrad::Tensor&)>&
                           before_step = {});

}  // namespace claims
