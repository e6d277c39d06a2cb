#include <tapegrad/debug/recalibrate.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/view_ops.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/hooks.h>

namespace tapegrad::debug {
namespace {

// Per-channel count, mean and sum of squared deviations, merged batch by batch
// (Chan, Golub & LeVeque 1979), in float64.
struct Moments {
  std::int64_t n = 0;
  std::vector<double> mean, m2;
  void add(const Tensor& x) {
    const std::int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<std::int64_t>(1, N * C);
    const std::vector<double> v = x.to_vector();
    if (mean.empty()) mean.assign(static_cast<std::size_t>(C), 0.0), m2.assign(static_cast<std::size_t>(C), 0.0);
    const std::int64_t nb = N * S;
    if (nb == 0) return;
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t k = 0; k < S; ++k) s += v[static_cast<std::size_t>((i * C + c) * S + k)];
      const double mb = s / static_cast<double>(nb);
      double q = 0;
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t k = 0; k < S; ++k) {
          const double d = v[static_cast<std::size_t>((i * C + c) * S + k)] - mb;
          q += d * d;
        }
      const auto cc = static_cast<std::size_t>(c);
      const double na = static_cast<double>(n), nbd = static_cast<double>(nb), nt = na + nbd;
      const double delta = mb - mean[cc];
      mean[cc] += delta * nbd / nt;
      m2[cc] += q + delta * delta * na * nbd / nt;
    }
    n += nb;
  }
};

}  // namespace

RecalibrationReport recalibrate_batch_norm(layers::Module& model, const BatchSource& batches) {
  if (!batches) throw std::invalid_argument("recalibrate_batch_norm: expected a batch source, got an empty function");
  std::vector<std::pair<std::string, layers::BatchNormBase*>> bns;
  for (auto& [p, m] : model.named_modules())
    if (auto* bn = dynamic_cast<layers::BatchNormBase*>(m); bn && bn->running_mean.defined()) bns.emplace_back(p, bn);
  RecalibrationReport report;
  if (bns.empty()) return report;

  layers::ModeRestore modes(model);
  NoGradGuard no_grad;
  AuditPause pause;
  model.eval();

  // The hooks are global and another thread may still run a copy of one after it is removed:
  // each hook owns what it touches (shared_ptr), and matches only this model's modules.
  std::vector<const layers::Module*> targets;
  for (auto& [p, bn] : bns) targets.push_back(bn);

  // Pass 0: the order in which the BatchNorms run (forward order), and the batch count.
  auto seen = std::make_shared<std::vector<std::size_t>>();
  {
    layers::hooks::ScopedForwardHook hook([seen, targets](layers::Module& m, const Tensor&, const Tensor&) {
      for (std::size_t i = 0; i < targets.size(); ++i)
        if (targets[i] == &m && std::find(seen->begin(), seen->end(), i) == seen->end()) seen->push_back(i);
    });
    batches([&](const Tensor& x) {
      model(x);
      ++report.batches;
    });
  }
  const std::vector<std::size_t> order = *seen;
  if (order.size() != bns.size())
    for (std::size_t i = 0; i < bns.size(); ++i)
      if (std::find(order.begin(), order.end(), i) == order.end())
        throw std::invalid_argument("recalibrate_batch_norm: BatchNorm '" + bns[i].first +
                                    "' is never reached by the data (" + std::to_string(report.batches) +
                                    " batches): expected every BatchNorm to run");

  // One pass per BatchNorm: its eval-mode input over all the data, then its new statistics.
  for (std::size_t i : order) {
    auto& [path, bn] = bns[i];
    auto acc = std::make_shared<Moments>();
    {
      const layers::Module* target = bn;
      layers::hooks::ScopedForwardHook hook([acc, target](layers::Module& m, const Tensor& in, const Tensor&) {
        if (&m == target) acc->add(in);
      });
      batches([&](const Tensor& x) { model(x); });
    }
    const Moments& mo = *acc;
    if (mo.n < 2)
      throw std::invalid_argument("recalibrate_batch_norm: BatchNorm '" + path +
                                  "' needs >= 2 values per channel for an unbiased variance, got " +
                                  std::to_string(mo.n));
    RecalibratedLayer l;
    l.module = path;
    l.values = mo.n;
    const auto old_mean = bn->running_mean.to_vector(), old_var = bn->running_var.to_vector();
    std::vector<double> var(mo.m2.size());
    for (std::size_t c = 0; c < var.size(); ++c) {
      var[c] = mo.m2[c] / static_cast<double>(mo.n - 1);
      const double eps = bn->options.eps;
      l.max_var_log_change = std::max(l.max_var_log_change, std::fabs(std::log((var[c] + eps) / (old_var[c] + eps))));
      l.max_mean_change = std::max(l.max_mean_change, std::fabs(mo.mean[c] - old_mean[c]) / std::sqrt(var[c] + eps));
    }
    bn->running_mean.copy_(Tensor::from_vector(mo.mean, bn->running_mean.shape(), bn->running_mean.dtype()));
    bn->running_var.copy_(Tensor::from_vector(var, bn->running_var.shape(), bn->running_var.dtype()));
    bn->num_batches_tracked.data<std::int64_t>()[0] += report.batches;
    report.layers.push_back(l);
  }
  return report;
}

RecalibrationReport recalibrate_batch_norm(layers::Module& model, const Tensor& x, std::int64_t batch) {
  if (batch < 1) throw std::invalid_argument("recalibrate_batch_norm: expected batch >= 1, got " + std::to_string(batch));
  if (!x.defined() || x.dim() < 2 || x.size(0) < 2)
    throw std::invalid_argument("recalibrate_batch_norm: expected inputs (N, C, ...) with N >= 2, got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  const std::int64_t N = x.size(0);
  return recalibrate_batch_norm(model, BatchSource([&](const std::function<void(const Tensor&)>& visit) {
                                  for (std::int64_t b = 0; b < N; b += batch)
                                    visit(narrow(x, 0, b, std::min(batch, N - b)));
                                }));
}

std::string RecalibrationReport::to_string() const {
  std::ostringstream os;
  for (const auto& l : layers)
    os << l.module << ": " << l.values << " values per channel, max |ln var change| " << l.max_var_log_change
       << ", max mean change " << l.max_mean_change << " std\n";
  return os.str();
}

}  // namespace tapegrad::debug
