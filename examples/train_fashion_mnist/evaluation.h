#pragma once
// Evaluation of a classifier on a dataset: the training room's (tapegrad/train/evaluate.h),
// in eval mode without the tape, in one process or split across the ranks of a data-parallel
// run with the same totals.
#include <cstdint>
#include <vector>

#include <tapegrad/data/dataset.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/train/evaluate.h>

namespace fmnist {

using tapegrad::train::DataParallel;
using tapegrad::train::Evaluation;
using tapegrad::train::kEvalBatch;

/// tapegrad::train::evaluate with the summed cross-entropy as the loss.
inline Evaluation evaluate_model(tapegrad::layers::Module& model, const tapegrad::data::Dataset& ds,
                                 DataParallel* parallel = nullptr, std::int64_t batch_size = kEvalBatch) {
  tapegrad::train::EvalOptions o;
  o.batch_size = batch_size;
  o.parallel = parallel;
  return tapegrad::train::evaluate(model, ds, o);
}

/// Accuracy (and the confusion matrix) of evaluate_model in one process.
inline double evaluate(tapegrad::layers::Module& model, const tapegrad::data::Dataset& ds,
                       std::vector<std::vector<std::int64_t>>* confusion = nullptr,
                       std::int64_t batch_size = kEvalBatch) {
  Evaluation e = evaluate_model(model, ds, nullptr, batch_size);
  if (confusion) *confusion = std::move(e.confusion);
  return e.accuracy();
}

}  // namespace fmnist
