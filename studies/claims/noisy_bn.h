#pragma once
// `claims noisy-bn`: Santurkar et al. 2018 §2.1 / Algorithm 1 — if BN helped by keeping each
// layer's input distribution stable, BN followed by time-varying, non-zero-mean,
// non-unit-variance noise (DistributionNoise) should lose that benefit. Four nets: plain,
// plain + noise, BN, BN + noise (noise after each hidden layer's BN, or after its Linear),
// on (a) Santurkar's deep linear network (deep_linear.h, full-batch GD) and (b) the
// Fashion-MNIST MLP 784-256-128-10 (SGD momentum 0.9), every seed.
#include <cstdint>
#include <string>
#include <vector>

#include "deep_linear.h"
#include "distribution_noise.h"
#include "mlp.h"
#include "kit/training_options.h"

namespace claims {

struct NoisyOptions : studies::kit::FashionGridOptions {
  NoiseOptions noise;
  LinearOptions linear;  ///< deep linear part (steps, lr, every; seeds and threads from below)
  int epochs = 5;
  std::int64_t batch = 64;
  double lr = 0.05;
  std::vector<std::int64_t> hidden = {256, 128};
};
/// --quick: 2 seeds; deep linear 100 steps; MLP 1 epoch on 2,048 / 2,000 images.
NoisyOptions quick_noisy_options(NoisyOptions o);
/// Throws std::invalid_argument naming the option.
void check_noisy_options(const NoisyOptions& o);

struct NoisyMlpRun : studies::kit::BnVsPlainRun {
  bool noise = false;
  TrainOutcome out;
};
/// runs: the MLP's, (plain, plain+noise, bn, bn+noise) × seeds; seconds: both nets'.
struct NoisyResult : studies::kit::GridResult<NoisyOptions, NoisyMlpRun> {
  LinearResult linear;
};

NoisyResult run_noisy_bn(const NoisyOptions& o, const studies::kit::StudyData& d);
std::string noisy_csv(const NoisyResult& r);
std::string noisy_summary(const NoisyResult& r);
std::vector<std::string> write_noisy(const NoisyResult& r, const std::string& dir);

}  // namespace claims
