#include <tapegrad/optim/clip_grad.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/optim/kernels/update.h>
#include <tapegrad/optim/optimizer.h>

namespace tapegrad::optim {

namespace {

// norm_type-norm of one tensor (accumulated in double), as torch.norm(g, norm_type).
double tensor_norm(const Tensor& g, double p) {
  return TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm_", [&] {
    const scalar_t* x = g.data<scalar_t>();
    const std::int64_t n = g.numel();
    double acc = 0;
    if (std::isinf(p)) {
      for (std::int64_t i = 0; i < n; ++i) {
        const double a = std::abs(static_cast<double>(x[i]));
        if (std::isnan(a)) return a;
        acc = std::max(acc, a);
      }
      return acc;
    }
    if (p == 2.0) {
      for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      return std::sqrt(acc);
    }
    if (p == 1.0) {
      for (std::int64_t i = 0; i < n; ++i) acc += std::abs(static_cast<double>(x[i]));
      return acc;
    }
    for (std::int64_t i = 0; i < n; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), p);
    return std::pow(acc, 1.0 / p);
  });
}

double combine(const std::vector<double>& norms, double p) {
  if (std::isinf(p)) {
    double m = 0;
    for (double v : norms) {
      if (std::isnan(v)) return v;
      m = std::max(m, v);
    }
    return m;
  }
  double acc = 0;
  for (double v : norms) acc += p == 2.0 ? v * v : std::pow(v, p);
  return p == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / p);
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  if (!(max_norm >= 0)) throw std::invalid_argument("clip_grad_norm_: expected max_norm >= 0, got " + detail::num(max_norm));
  if (!(norm_type > 0))
    throw std::invalid_argument("clip_grad_norm_: expected norm_type > 0 (or infinity), got " + detail::num(norm_type));
  std::vector<Tensor> grads;
  for (auto& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  std::vector<double> norms;
  for (auto& g : grads) norms.push_back(tensor_norm(g, norm_type));
  const double total = combine(norms, norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    throw std::runtime_error("clip_grad_norm_: the total norm of order " + detail::num(norm_type) +
                             " of the gradients is " + detail::num(total) +
                             " (non-finite); gradients were left unchanged");
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  for (auto& g : grads)
    TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm_", [&] {
      kernels::scale_inplace<scalar_t>(g.data<scalar_t>(), static_cast<scalar_t>(coef), g.numel());
    });
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0))
    throw std::invalid_argument("clip_grad_value_: expected clip_value >= 0, got " + detail::num(clip_value));
  for (auto& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad();
    TAPEGRAD_DISPATCH_FLOAT(g.dtype(), "clip_grad_value_", [&] {
      // std::clamp's result (NaN stays NaN), per ISA level (kernels/update.h)
      kernels::clip_value<scalar_t>(g.data<scalar_t>(), static_cast<scalar_t>(clip_value), g.numel());
    });
  }
}

}  // namespace tapegrad::optim
