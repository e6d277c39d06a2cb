#pragma once
// The per-channel mean and unbiased variance of each BatchNorm's input, as the model in
// eval mode feeds it (Dropout off, running statistics in use): "real_var" of Li et al. 2019.
#include <cstdint>
#include <vector>

#include <tapegrad/layers/batch_norm.h>

namespace claims {

struct ChannelMoments {
  std::vector<double> mean, var;  ///< per channel, var unbiased (divide by n − 1)
  std::int64_t n = 0;             ///< values per channel
};

/// Runs x (N, ...) through `model` in eval mode, no grad, in batches of `batch` rows, and
/// returns the float64 moments of the input of each module in `bns` (same order). Modes
/// are restored; nothing else changes. Throws std::invalid_argument when a module is never
/// reached or sees fewer than 2 values per channel.
std::vector<ChannelMoments> eval_input_moments(tapegrad::layers::Module& model,
                                               const std::vector<tapegrad::layers::BatchNormBase*>& bns,
                                               const tapegrad::Tensor& x, std::int64_t batch = 1000);

}  // namespace claims
