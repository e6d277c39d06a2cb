#pragma once
// recalibrate_batch_norm: re-estimate every BatchNorm's running statistics from data, with
// the model in eval mode (Dropout off) — the fix for running statistics that do not describe
// what the layer sees at inference (Dropout before BN, Li et al. 2019 "variance shift";
// momentum mix-ups; checkpoints loaded without buffers; fine-tuning on shifted data).
#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/layers/module.h>

namespace tapegrad::debug {

/// One recalibrated BatchNorm.
struct RecalibratedLayer {
  std::string module;            ///< dotted path
  std::int64_t values = 0;       ///< values per channel it was estimated from (N, or N·L, N·H·W)
  /// max over channels of |ln(new running_var / old running_var)|: ln 2 = 0.69 means a factor 2.
  double max_var_log_change = 0;
  /// max over channels of |new − old running_mean| / sqrt(new running_var + eps).
  double max_mean_change = 0;
};
/// What recalibrate_batch_norm changed, layer by layer.
struct RecalibrationReport {
  std::vector<RecalibratedLayer> layers;  ///< in forward order
  std::int64_t batches = 0;               ///< batches per pass
  /// One line per layer (its path, the largest mean and variance changes) for a log.
  std::string to_string() const;
};

/// Calls `visit` once for each input batch (N, C, ...) of the data; called once per
/// BatchNorm plus once, so it must yield the same rows every time (their order may change).
using BatchSource = std::function<void(const std::function<void(const Tensor&)>& visit)>;

/// Sets running_mean and running_var of every BatchNorm-family module that tracks running
/// statistics to the mean and unbiased variance (divide by n − 1) of its input over all the
/// data, per channel (over N and every dim after C), as the model in eval mode feeds it:
/// Dropout off and every earlier BatchNorm already recalibrated, so after the call each
/// layer's running statistics are exactly the statistics it sees at inference on this data.
/// This is the cumulative average (momentum unset) over the data taken as one batch,
/// accumulated in float64 (Chan et al.'s pairwise update), so the result does not depend
/// on the batch size; one pass per BatchNorm, in forward order (found by a first pass).
/// num_batches_tracked grows by the number of batches of a pass, as a cumulative pass would.
/// Every module's mode and each BatchNorm's options (momentum included) are unchanged; no
/// tape is recorded. Throws std::invalid_argument when the data has fewer than 2 values
/// per channel for some BatchNorm (naming it), or a BatchNorm is never reached by the data;
/// model errors propagate (the model is then left with its modes restored).
RecalibrationReport recalibrate_batch_norm(layers::Module& model, const BatchSource& batches);

/// The same over the rows of x (N, ...) in consecutive batches of `batch` rows
/// (the last one smaller). Throws std::invalid_argument for batch < 1 or N < 2.
RecalibrationReport recalibrate_batch_norm(layers::Module& model, const Tensor& x, std::int64_t batch = 1024);

/// The same over a loader whose range-for yields batches with an `X` member (data::DataLoader):
/// the inputs of every batch, targets ignored.
template <class Loader>
  requires requires(Loader& l) { (*l.begin()).X; }
RecalibrationReport recalibrate_batch_norm(layers::Module& model, Loader& loader) {
  return recalibrate_batch_norm(model, BatchSource([&loader](const std::function<void(const Tensor&)>& visit) {
                                  for (auto b : loader) visit(b.X);
                                }));
}

}  // namespace tapegrad::debug
