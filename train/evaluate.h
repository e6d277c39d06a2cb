#pragma once
// Evaluation and prediction of a model over a dataset in batches: eval mode, no tape, the
// model's previous mode restored; in one process or split across the ranks of a data-parallel
// run with the same totals.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <tapegrad/core/tensor.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/train/data_parallel.h>
#include <tapegrad/train/metrics.h>

namespace tapegrad::train {

/// A loss: output and target in, a scalar out (mean over the batch's rows), e.g.
/// layers::CrossEntropyLoss{} or layers::MSELoss{}.
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

/// Rows per evaluation batch. With R ranks, batch k goes to rank k mod R: 500 splits 5,000
/// or 10,000 rows evenly over 2, 4 or 5 ranks.
inline constexpr std::int64_t kEvalBatch = 500;

/// How evaluate() batches, which loss it sums, and over which processes.
struct EvalOptions {
  /// Rows per evaluation batch, >= 1 (default kEvalBatch).
  std::int64_t batch_size = kEvalBatch;
  /// The loss summed into loss_sum as loss(output, y) · rows per batch. Empty: cross-entropy
  /// (summed per batch) for class targets, none otherwise.
  LossFn loss;
  /// Data-parallel run (every rank calls evaluate with the same model and data): rank r
  /// evaluates batches r, r + R, ... only and the per-batch results are summed over ranks in
  /// batch order, so every rank gets the totals of one process's pass bit for bit.
  DataParallel* parallel = nullptr;
  /// The mode checks (core/mode_checks.h) during this call: unset = the process setting;
  /// false = paused; true = on (Warn where the setting is Off).
  std::optional<bool> mode_checks;
};

/// Totals of one evaluation pass. For int64 class targets and (N, C) outputs: correct and the
/// confusion matrix are filled (argmax of each row, the first maximum).
struct Evaluation {
  std::int64_t count = 0;    ///< rows
  std::int64_t correct = 0;  ///< rows whose argmax equals the label
  double loss_sum = 0;       ///< Σ over batches of the loss · rows (nats for cross-entropy)
  /// Whether a loss was computed (loss_sum is meaningful).
  bool has_loss = false;
  ConfusionMatrix confusion;  ///< [true][predicted], classes × classes (empty without classes)
  /// correct / count (0 for no rows).
  double accuracy() const { return count > 0 ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
  /// loss_sum / count: the mean loss per row (0 for no rows).
  double mean_loss() const { return count > 0 ? loss_sum / static_cast<double>(count) : 0.0; }
};

/// Runs `model` over `ds` as above. Throws std::invalid_argument for batch_size < 1, or a
/// label outside [0, C) (naming the row); std::runtime_error for a NaN or infinite output
/// with class targets (naming the row: no accuracy is computed from it).
/// In a data-parallel run (world_size() > 1) every rank first checks that all ranks have the
/// same rows and batch size (check_same_eval_data: std::invalid_argument on every rank);
/// then an exception on one rank ends the whole job through DataParallel::abort
/// (run_parallel_guarded) instead of leaving the others waiting.
Evaluation evaluate(layers::Module& model, const data::Dataset& ds, const EvalOptions& options = {});

/// The model's outputs for the rows of X (N, ...), in batches of batch_size, in eval mode
/// without the tape (mode restored), concatenated along dim 0. Throws std::invalid_argument for
/// batch_size < 1 or an X without rows dimension.
Tensor predict(layers::Module& model, const Tensor& X, std::int64_t batch_size = kEvalBatch);

}  // namespace tapegrad::train
