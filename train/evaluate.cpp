#include <tapegrad/train/evaluate.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops/minmax.h>
#include <tapegrad/core/ops/index_ops.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/layers/functional/losses.h>
#include <tapegrad/train/evaluate_batches.h>
#include <tapegrad/core/shape.h>

namespace tapegrad::train {

namespace {
// evaluate() without its guard (see evaluate() below).
Evaluation evaluate_batches_split(layers::Module& model, const data::Dataset& ds, const EvalOptions& o) {
  const std::int64_t batch_size = o.batch_size;
  if (batch_size < 1) throw std::invalid_argument("evaluate: expected batch_size >= 1, got " + std::to_string(batch_size));
  const ModeChecksOption checks(o.mode_checks);
  DataParallel* par = o.parallel;
  const int world = par ? par->world_size() : 1, rank = par ? par->rank() : 0;
  const std::int64_t n = ds.size(), batches = ceil_div(n, batch_size);
  const bool class_targets = ds.y.defined() && ds.y.dtype() == Dtype::Int64 && ds.y.dim() == 1;
  // Per batch: the loss sum and the correct count; then the confusion matrix. Each slot is
  // written by one rank and zero elsewhere, so the sums over ranks are exact.
  std::vector<double> loss(static_cast<std::size_t>(batches), 0.0);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(batches), 0);
  std::int64_t classes = 0;
  std::vector<std::int64_t> confusion;
  // train::evaluate_batches: eval mode, no tape, every module's mode restored; this rank's
  // batches rank, rank + R, ... only.
  train::BatchEvalOptions eo;
  eo.batch_size = batch_size;
  eo.first_batch = rank;
  eo.batch_step = world;
  train::evaluate_batches(model, ds.X, eo, [&](std::int64_t k, std::int64_t begin, std::int64_t end, const Tensor& out) {
    const Tensor target = ds.y.defined() ? narrow(ds.y, 0, begin, end - begin).clone() : Tensor();
    const std::size_t slot = static_cast<std::size_t>(k);
    if (class_targets && out.dim() == 2) {
      const Tensor logits = out.to(Dtype::Float32);
      const std::int64_t m = logits.size(0), c = logits.size(1);
      if (confusion.empty()) {
        classes = c;
        confusion.assign(static_cast<std::size_t>(c * c), 0);
      }
      const float* z = logits.data<float>();
      for (std::int64_t i = 0; i < m * c; ++i)
        if (!std::isfinite(z[i]))  // argmax would pick a class for it: an accuracy not earned
          throw std::runtime_error("evaluate: the model's output for row " + std::to_string(begin + i / c) + " is " +
                                   (std::isnan(z[i]) ? "nan" : z[i] > 0 ? "inf" : "-inf") +
                                   ", not finite (non-finite inputs, or a diverged model)");
      const Tensor predicted = argmax(logits, 1);  // the first maximum of each row
      const std::int64_t* best = predicted.data<std::int64_t>();
      const std::int64_t* y = target.data<std::int64_t>();
      for (std::int64_t i = 0; i < m; ++i) {
        if (y[i] < 0 || y[i] >= c)
          throw std::invalid_argument("evaluate: label " + std::to_string(y[i]) + " of row " +
                                      std::to_string(begin + i) + " outside [0, " + std::to_string(c) + ")");
        counts[slot] += best[i] == y[i];
        confusion[static_cast<std::size_t>(y[i] * c + best[i])]++;
      }
      if (!o.loss)
        loss[slot] = layers::functional::cross_entropy(logits, target, layers::functional::Reduction::Sum).item();
    }
    if (o.loss) loss[slot] = o.loss(out, target).item() * static_cast<double>(end - begin);
  });
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
  out.has_loss = o.loss || classes > 0;
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

}  // namespace

// A data-parallel evaluation first checks that every rank has the same data (an exception on
// every rank otherwise), then runs under a guard: an exception on one rank (a bad label in
// its batches) ends the job with its message instead of leaving the others in the sums.
Evaluation evaluate(layers::Module& model, const data::Dataset& ds, const EvalOptions& o) {
  if (o.parallel && o.parallel->world_size() > 1) check_same_eval_data(*o.parallel, ds, o.batch_size);
  Evaluation result;
  run_parallel_guarded(o.parallel, [&] { result = evaluate_batches_split(model, ds, o); });
  return result;
}

Tensor predict(layers::Module& model, const Tensor& X, std::int64_t batch_size) {
  if (batch_size < 1) throw std::invalid_argument("predict: expected batch_size >= 1, got " + std::to_string(batch_size));
  if (!X.defined() || X.dim() < 1)
    throw std::invalid_argument("predict: expected inputs with a rows dimension (N, ...), got " +
                                (X.defined() ? shape_str(X.shape()) : std::string("an undefined tensor")));
  const std::int64_t n = X.size(0);
  train::BatchEvalOptions eo;  // eval mode, no tape, modes restored
  eo.batch_size = n <= batch_size ? 0 : batch_size;  // one batch: X itself
  std::vector<Tensor> parts;
  train::evaluate_batches(model, X, eo, [&](std::int64_t, std::int64_t, std::int64_t, const Tensor& out) {
    parts.push_back(out);
  });
  if (parts.size() == 1) return parts.front();
  return cat(parts, 0);
}

}  // namespace tapegrad::train
