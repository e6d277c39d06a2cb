#include "evaluation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/minmax.h>
#include <tapegrad/layers/functional/losses.h>

namespace fmnist {

using namespace tapegrad;

Evaluation evaluate_model(layers::Module& model, const data::Dataset& ds, DataParallel* par,
                          std::int64_t batch_size) {
  if (batch_size < 1)
    throw std::invalid_argument("evaluate: expected batch_size >= 1, got " + std::to_string(batch_size));
  const int world = par ? par->world_size() : 1, rank = par ? par->rank() : 0;
  const std::int64_t n = ds.size(), batches = (n + batch_size - 1) / batch_size;
  // Per batch: the loss sum, and the correct count; then the confusion matrix. Each slot is
  // written by one rank and zero elsewhere, so the sums over ranks are exact.
  std::vector<double> loss(static_cast<std::size_t>(batches), 0.0);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(batches), 0);
  std::int64_t classes = 0;
  std::vector<std::int64_t> confusion;
  const bool was_training = model.is_training();
  model.eval();
  {
    NoGradGuard no_grad;
    for (std::int64_t k = rank; k < batches; k += world) {
      const data::Dataset part = ds.slice(k * batch_size, std::min(n, (k + 1) * batch_size));
      const Tensor logits = model(part.X).to(Dtype::Float32);
      const std::int64_t m = logits.size(0), c = logits.size(1);
      if (confusion.empty()) {
        classes = c;
        confusion.assign(static_cast<std::size_t>(c * c), 0);
      }
      const Tensor predicted = argmax(logits, 1);  // the first maximum of each row
      const std::int64_t* best = predicted.data<std::int64_t>();
      const std::int64_t* y = part.y.data<std::int64_t>();
      for (std::int64_t i = 0; i < m; ++i) {
        if (y[i] < 0 || y[i] >= c)
          throw std::invalid_argument("evaluate: label " + std::to_string(y[i]) + " of row " +
                                      std::to_string(k * batch_size + i) + " outside [0, " + std::to_string(c) + ")");
        counts[static_cast<std::size_t>(k)] += best[i] == y[i];
        confusion[static_cast<std::size_t>(y[i] * c + best[i])]++;
      }
      loss[static_cast<std::size_t>(k)] =
          layers::functional::cross_entropy(logits, part.y, layers::functional::Reduction::Sum).item();
    }
  }
  model.train(was_training);
  if (par && world > 1) {
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
  out.count = n;
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
