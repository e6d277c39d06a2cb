#include <tapegrad/train/evaluate_batches.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops/minmax.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/layers/functional/losses.h>
#include <tapegrad/core/shape.h>

namespace tapegrad::train {

namespace {

void check(const Tensor& X, const BatchEvalOptions& o) {
  if (o.batch_size < 0)
    throw std::invalid_argument("evaluate: expected batch_size >= 0 (0: one batch), got " + std::to_string(o.batch_size));
  if (o.first_batch < 0 || o.batch_step < 1)
    throw std::invalid_argument("evaluate: expected first_batch >= 0 and batch_step >= 1, got " +
                                std::to_string(o.first_batch) + " and " + std::to_string(o.batch_step));
  if (X.dim() < 1) throw std::invalid_argument("evaluate: expected an input with a batch dimension, got a 0-d tensor");
}

}  // namespace

std::int64_t num_batches(std::int64_t rows, const BatchEvalOptions& o) {
  if (o.batch_size < 0)
    throw std::invalid_argument("evaluate: expected batch_size >= 0 (0: one batch), got " + std::to_string(o.batch_size));
  if (o.batch_size == 0) return rows > 0 ? 1 : 0;
  return o.drop_last ? rows / o.batch_size : ceil_div(rows, o.batch_size);
}

void evaluate_batches(layers::Module& model, const Tensor& X, const BatchEvalOptions& o, const BatchFn& fn) {
  check(X, o);
  const std::int64_t n = X.size(0), batches = num_batches(n, o);
  layers::ModeRestore restore(model);
  model.train(o.train_mode);
  NoGradGuard no_grad;
  std::optional<ModeChecksPause> deliberate;  // train_mode asks for a train-mode forward without the tape
  if (o.train_mode) deliberate.emplace();
  for (std::int64_t k = o.first_batch; k < batches; k += o.batch_step) {
    if (o.batch_size == 0) {
      fn(k, 0, n, model(X));
      continue;
    }
    const std::int64_t begin = k * o.batch_size, end = std::min(n, begin + o.batch_size);
    const Tensor rows = narrow(X, 0, begin, end - begin).clone();
    fn(k, begin, end, model(rows));
  }
}

double ClassifierEvaluation::accuracy() const {
  return count > 0 ? static_cast<double>(correct) / static_cast<double>(count) : std::nan("");
}

double ClassifierEvaluation::mean_loss() const {
  return count > 0 ? loss_sum / static_cast<double>(count) : std::nan("");
}

ClassifierEvaluation evaluate_classifier(layers::Module& model, const Tensor& X, const Tensor& y,
                                         const ClassifierEvalOptions& o) {
  check(X, o);
  if (y.dim() != 1 || y.size(0) != X.size(0))
    throw std::invalid_argument("evaluate_classifier: expected labels of shape [" + std::to_string(X.size(0)) +
                                "] (one per input row), got " + std::to_string(y.dim()) + "-d labels with " +
                                std::to_string(y.dim() > 0 ? y.size(0) : 0) + " rows");
  ClassifierEvaluation r;
  const auto batches = static_cast<std::size_t>(num_batches(X.size(0), o));
  r.batch_correct.assign(batches, 0);
  r.batch_loss.assign(batches, 0.0);
  evaluate_batches(model, X, o, [&](std::int64_t k, std::int64_t begin, std::int64_t end, const Tensor& out) {
    const Tensor logits = out.to(o.loss_dtype);
    const std::int64_t m = logits.size(0), c = logits.size(1);
    if (r.confusion.empty()) {
      r.classes = c;
      r.confusion.assign(static_cast<std::size_t>(c * c), 0);
    }
    const Tensor labels = o.batch_size == 0 ? y : narrow(y, 0, begin, end - begin).clone();
    const Tensor predicted = argmax(logits, 1);  // the first maximum of each row
    const std::int64_t* best = predicted.data<std::int64_t>();
    const std::int64_t* t = labels.data<std::int64_t>();
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      if (t[i] < 0 || t[i] >= c)
        throw std::invalid_argument("evaluate: label " + std::to_string(t[i]) + " of row " + std::to_string(begin + i) +
                                    " outside [0, " + std::to_string(c) + ")");
      correct += best[i] == t[i];
      r.confusion[static_cast<std::size_t>(t[i] * c + best[i])]++;
    }
    const double loss =
        layers::functional::cross_entropy(logits, labels, layers::functional::Reduction::Sum).item();
    r.batch_correct[static_cast<std::size_t>(k)] = correct;
    r.batch_loss[static_cast<std::size_t>(k)] = loss;
    r.correct += correct;
    r.loss_sum += loss;
    r.count += m;
  });
  return r;
}

}  // namespace tapegrad::train
