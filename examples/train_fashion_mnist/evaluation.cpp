#include "evaluation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <tapegrad/models/evaluate.h>

namespace fmnist {

using namespace tapegrad;

Evaluation evaluate_model(layers::Module& model, const data::Dataset& ds, DataParallel* par,
                          std::int64_t batch_size) {
  if (batch_size < 1)
    throw std::invalid_argument("evaluate: expected batch_size >= 1, got " + std::to_string(batch_size));
  const int world = par ? par->world_size() : 1, rank = par ? par->rank() : 0;
  // This rank's batches rank, rank + R, ...: per batch the loss sum and the correct count
  // (zero for other ranks' batches), and this rank's confusion matrix.
  models::ClassifierOptions o;
  o.batch_size = batch_size;
  o.first_batch = rank;
  o.batch_step = world;
  o.loss_dtype = Dtype::Float32;
  models::ClassifierEvaluation e = models::evaluate_classifier(model, ds.X, ds.y, o);
  const std::int64_t batches = static_cast<std::int64_t>(e.batch_loss.size());
  std::int64_t classes = e.classes;
  std::vector<std::int64_t> counts = std::move(e.batch_correct), confusion = std::move(e.confusion);
  std::vector<double> loss = std::move(e.batch_loss);
  if (par && world > 1) {
    // Each slot is written by one rank and zero elsewhere, so the sums over ranks are exact.
    // The class count first: a rank without batches (fewer batches than ranks) has none.
    std::int64_t seen[2] = {classes, classes > 0 ? 1 : 0};
    par->sum(seen, 2);
    if (seen[1] > 0) classes = seen[0] / seen[1];  // the ranks with batches agree on it
    std::vector<std::int64_t> ints(counts);
    std::vector<std::int64_t> local_conf(static_cast<std::size_t>(classes * classes), 0);
    if (!confusion.empty()) local_conf = confusion;
    ints.insert(ints.end(), local_conf.begin(), local_conf.end());
    par->sum(ints.data(), static_cast<std::int64_t>(ints.size()));
    par->sum(loss.data(), static_cast<std::int64_t>(loss.size()));
    counts.assign(ints.begin(), ints.begin() + batches);
    confusion.assign(ints.begin() + batches, ints.end());
  }
  Evaluation out;
  out.count = ds.size();
  for (std::int64_t k = 0; k < batches; ++k) {
    out.correct += counts[static_cast<std::size_t>(k)];
    out.loss_sum += loss[static_cast<std::size_t>(k)];
  }
  if (classes > 0) {
    out.confusion.assign(static_cast<std::size_t>(classes), std::vector<std::int64_t>(static_cast<std::size_t>(classes)));
    for (std::int64_t t = 0; t < classes; ++t)
      for (std::int64_t p = 0; p < classes; ++p)
        out.confusion[static_cast<std::size_t>(t)][static_cast<std::size_t>(p)] =
            confusion[static_cast<std::size_t>(t * classes + p)];
  }
  return out;
}

double evaluate(layers::Module& model, const data::Dataset& ds, std::vector<std::vector<std::int64_t>>* confusion,
                std::int64_t batch_size) {
  Evaluation e = evaluate_model(model, ds, nullptr, batch_size);
  if (confusion) *confusion = std::move(e.confusion);
  return e.accuracy();
}

}  // namespace fmnist
