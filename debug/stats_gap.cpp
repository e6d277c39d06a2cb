#include <tapegrad/debug/stats_gap.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/debug/buffers.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/hooks.h>

namespace tapegrad::debug {

StatsGapReport running_stats_gap(layers::Module& model, const Tensor& x) {
  if (!x.defined() || x.dim() < 2 || x.size(0) < 2)
    throw std::invalid_argument("running_stats_gap: expected a batch (N, C, ...) with N >= 2, got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  std::vector<std::pair<std::string, layers::BatchNormBase*>> bns;
  for (auto& [p, m] : model.named_modules())
    if (auto* bn = dynamic_cast<layers::BatchNormBase*>(m); bn && bn->running_mean.defined()) bns.emplace_back(p, bn);
  std::vector<Tensor> inputs(bns.size());
  {
    BufferRestore buffers(model);
    layers::ModeRestore modes(model);  // destroyed first: the modes come back before the buffers
    NoGradGuard ng;
    AuditPause pause;
    layers::hooks::ScopedForwardHook hook([&](layers::Module& m, const Tensor& in, const Tensor&) {
      for (std::size_t i = 0; i < bns.size(); ++i)
        if (bns[i].second == &m) inputs[i] = in;
    });
    model.train();
    model(x);
  }
  StatsGapReport r;
  for (std::size_t i = 0; i < bns.size(); ++i) {
    auto& [path, bn] = bns[i];
    StatsGap g;
    g.module = path;
    g.type = bn->type_name();
    if (!inputs[i].defined()) {  // never reached by this forward
      g.max_mean_gap = g.max_var_log_ratio = std::numeric_limits<double>::quiet_NaN();
      r.modules.push_back(g);
      continue;
    }
    Tensor mu, var;
    layers::functional::batch_moments(inputs[i], mu, var);
    const double m = static_cast<double>(inputs[i].numel() / inputs[i].size(1));
    const auto vm = mu.to_vector(), vv = var.to_vector();
    const auto rm = bn->running_mean.to_vector(), rv = bn->running_var.to_vector();
    const double eps = bn->options.eps;
    for (std::size_t c = 0; c < vm.size(); ++c) {
      const double unbiased = vv[c] * m / (m - 1.0);
      const double mg = std::fabs(rm[c] - vm[c]) / std::sqrt(unbiased + eps);
      const double vg = std::fabs(std::log((rv[c] + eps) / (unbiased + eps)));
      if (mg > g.max_mean_gap || std::isnan(mg)) {
        g.max_mean_gap = mg;
        g.worst_mean_channel = static_cast<std::int64_t>(c);
      }
      if (vg > g.max_var_log_ratio || std::isnan(vg)) {
        g.max_var_log_ratio = vg;
        g.worst_var_channel = static_cast<std::int64_t>(c);
      }
    }
    r.modules.push_back(g);
  }
  return r;
}

double StatsGapReport::worst_mean_gap() const {
  double w = 0;
  for (auto& g : modules) w = std::isnan(g.max_mean_gap) ? w : std::max(w, g.max_mean_gap);
  return w;
}

double StatsGapReport::worst_var_log_ratio() const {
  double w = 0;
  for (auto& g : modules) w = std::isnan(g.max_var_log_ratio) ? w : std::max(w, g.max_var_log_ratio);
  return w;
}

bool StatsGapReport::stale(double mean_tol, double var_log_tol) const {
  return worst_mean_gap() > mean_tol || worst_var_log_ratio() > var_log_tol;
}

std::string StatsGapReport::to_string() const {
  std::ostringstream os;
  for (auto& g : modules)
    os << g.module << " (" << g.type << "): max mean gap " << g.max_mean_gap << " std (channel "
       << g.worst_mean_channel << "), max |ln var ratio| " << g.max_var_log_ratio << " (channel "
       << g.worst_var_channel << ")\n";
  return os.str();
}

}  // namespace tapegrad::debug
