#pragma once
// Evaluation of a classifier on a dataset in eval mode, in one process or split across the
// ranks of a data-parallel run with the same result.
#include <cstdint>
#include <vector>

#include <tapegrad/data/dataset.h>
#include "data_parallel_hooks.h"
#include <tapegrad/layers/module.h>

namespace fmnist {

/// Rows per evaluation batch. With R ranks, batch k goes to rank k mod R: 500 keeps the
/// 5,000 validation and 10,000 test images evenly split over 2, 4 or 5 ranks.
inline constexpr std::int64_t kEvalBatch = 500;

/// Totals of one evaluation pass.
struct Evaluation {
  std::int64_t count = 0;    ///< images
  std::int64_t correct = 0;  ///< argmax of the logits (first maximum) equal to the label
  double loss_sum = 0;       ///< Σ cross-entropy over the images (nats), batch sums added in batch order
  /// confusion[true][pred] (classes × classes; empty for an empty dataset).
  std::vector<std::vector<std::int64_t>> confusion;
  double accuracy() const { return count > 0 ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
  double mean_loss() const { return count > 0 ? loss_sum / static_cast<double>(count) : 0.0; }
};

/// Runs `model` in eval mode without the tape over `ds` in batches of `batch_size` rows
/// (models::evaluate_classifier: float32 loss; every module's previous mode is restored). With `parallel` (a data-parallel run; every
/// rank calls this with the same model and data): rank r evaluates batches r, r + R, ...
/// only, and the per-batch results are summed over ranks, so every rank gets totals
/// bit-identical to one process's pass (the same batches through the same arithmetic; the
/// loss sums added in batch order; eval-mode BatchNorm needs no communication).
/// Throws std::invalid_argument for batch_size < 1, or labels outside [0, classes).
Evaluation evaluate_model(tapegrad::layers::Module& model, const tapegrad::data::Dataset& ds,
                          DataParallel* parallel = nullptr, std::int64_t batch_size = kEvalBatch);

/// Accuracy (and the confusion matrix) of evaluate_model in one process.
double evaluate(tapegrad::layers::Module& model, const tapegrad::data::Dataset& ds,
                std::vector<std::vector<std::int64_t>>* confusion = nullptr, std::int64_t batch_size = kEvalBatch);

}  // namespace fmnist
