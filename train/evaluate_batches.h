#pragma once
// Batched evaluation without the tape: a model runs on consecutive row batches of its input
// under NoGradGuard, in eval mode (running statistics) or, on request, in train mode (batch
// statistics), and every module's previous mode is restored afterwards. This is the loop
// under train::evaluate and train::predict (train/evaluate.h), for tensors and a per-batch
// callback; evaluate() over a Dataset (with a loss, in parallel) is the usual call.
#include <cstdint>
#include <functional>
#include <vector>

#include <tapegrad/core/dtype.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::train {

/// How evaluate_batches splits its input and in which mode it runs the model.
struct BatchEvalOptions {
  std::int64_t batch_size = 0;   ///< rows per batch; 0: the whole input as one batch (not copied)
  bool drop_last = false;        ///< skip a last batch shorter than batch_size
  /// Train mode: the model normalises with batch statistics, and BatchNorm's running
  /// statistics and num_batches_tracked ARE updated by every batch (take
  /// debug::snapshot_buffers before and debug::restore_buffers after to undo that). A
  /// deliberate choice: the mode checks (core/mode_checks.h) are paused for the call.
  bool train_mode = false;
  /// Only batches first_batch, first_batch + batch_step, ... run (rank r of R in a
  /// data-parallel evaluation: first_batch r, batch_step R); batch indices stay global.
  std::int64_t first_batch = 0;  ///< the first batch this call runs (see above)
  std::int64_t batch_step = 1;   ///< the stride between the batches this call runs (>= 1)
};

/// Batches of `rows` rows under `o` (the last partial one counted unless drop_last).
/// Throws std::invalid_argument as evaluate_batches does.
std::int64_t num_batches(std::int64_t rows, const BatchEvalOptions& o);

/// One evaluated batch: its index k (0-based, over all batches), rows [begin, end) of the
/// input, and the model's output for them.
using BatchFn = std::function<void(std::int64_t k, std::int64_t begin, std::int64_t end, const Tensor& output)>;

/// Sets the model to eval (or train) mode, calls fn for every selected batch in order with
/// model(rows) computed under NoGradGuard, and restores every module's previous mode (also
/// when fn or the model throws). A batch's rows are copied into a fresh tensor; with
/// batch_size 0 the model sees X itself. Throws std::invalid_argument for batch_size < 0,
/// first_batch < 0, batch_step < 1, or an X without a batch dimension (0-d).
void evaluate_batches(layers::Module& model, const Tensor& X, const BatchEvalOptions& o, const BatchFn& fn);

/// A classifier's evaluation against integer labels: logits (N, classes) -> argmax (first
/// maximum) and cross-entropy (nats) against y (N,) of Int64 class indices.
struct ClassifierEvalOptions : BatchEvalOptions {
  Dtype loss_dtype = Dtype::Float32;  ///< logits are converted to this before argmax and the loss
};

/// Totals of evaluate_classifier over the batches it ran.
struct ClassifierEvaluation {
  std::int64_t count = 0;    ///< rows evaluated
  std::int64_t correct = 0;  ///< argmax equal to the label
  double loss_sum = 0;       ///< Σ cross-entropy over the rows: the batch sums added in batch order
  std::vector<std::int64_t> batch_correct;  ///< per batch index (all batches; 0 where not evaluated)
  std::vector<double> batch_loss;           ///< per batch index: the batch's cross-entropy sum
  std::int64_t classes = 0;                 ///< logits' width (0 when no batch ran)
  std::vector<std::int64_t> confusion;      ///< classes × classes, [true · classes + predicted]
  /// correct / count (NaN when no row was evaluated).
  double accuracy() const;
  /// loss_sum / count (NaN when no row was evaluated).
  double mean_loss() const;
};

/// Runs evaluate_batches and scores every batch. Throws std::invalid_argument for y not of
/// N rows, or a label outside [0, classes) (naming the label and its row).
ClassifierEvaluation evaluate_classifier(layers::Module& model, const Tensor& X, const Tensor& y,
                                         const ClassifierEvalOptions& o = {});

}  // namespace tapegrad::train
