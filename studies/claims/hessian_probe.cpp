#include "hessian_probe.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace claims {

using tapegrad::Tensor;

std::int64_t total_numel(const std::vector<Tensor>& ts) {
  std::int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel();
  return n;
}

std::vector<double> flatten(const std::vector<Tensor>& ts) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(total_numel(ts)));
  for (const Tensor& t : ts) {
    const std::vector<double> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<Tensor> unflatten(const std::vector<double>& flat, const std::vector<Tensor>& like) {
  const std::int64_t n = total_numel(like);
  if (static_cast<std::int64_t>(flat.size()) != n)
    throw std::invalid_argument("unflatten: expected " + std::to_string(n) + " values, got " + std::to_string(flat.size()));
  std::vector<Tensor> out;
  std::size_t at = 0;
  for (const Tensor& t : like) {
    const auto k = static_cast<std::size_t>(t.numel());
    out.push_back(Tensor::from_vector(std::vector<double>(flat.begin() + at, flat.begin() + at + k), t.shape(), t.dtype()));
    at += k;
  }
  return out;
}

SymmetricOperator flat_operator(const tapegrad::autograd::HessianOperator& h) {
  return [&h](const std::vector<double>& v) { return flatten(h(unflatten(v, h.params()))); };
}

SpectrumProbe probe_spectrum(const Tensor& loss, const std::vector<Tensor>& params, const SpectrumOptions& o) {
  if (o.top_k < 1) throw std::invalid_argument("probe_spectrum: expected top_k >= 1, got " + std::to_string(o.top_k));
  if (!(o.sigma_fraction > 0))
    throw std::invalid_argument("probe_spectrum: expected sigma_fraction > 0, got " + std::to_string(o.sigma_fraction));
  const tapegrad::autograd::HessianOperator h(loss, params);
  const SymmetricOperator op = flat_operator(h);
  const std::int64_t n = total_numel(params);
  SpectrumProbe p;
  const TopEigen t = top_eigen(op, n, o.top_k, o.seed, o.lanczos_steps);
  p.top = t.values;
  p.lambda_max = t.values.front();
  p.density = slq(op, n, o.slq);
  const auto [mn, mx] = std::minmax_element(p.density.nodes.begin(), p.density.nodes.end());
  p.lambda_min = *mn;
  // the range includes λ_max: SLQ's few nodes per probe may stop short of an isolated top eigenvalue
  const double range = std::max(*mx, p.lambda_max) - *mn;
  p.sigma = o.sigma_fraction * (range > 0 ? range : std::max(std::abs(p.lambda_max), 1e-12));
  p.bulk_edge = bulk_edge(p.density, p.sigma);
  p.outliers = static_cast<int>(std::count_if(p.top.begin(), p.top.end(), [&](double l) { return l > p.bulk_edge; }));
  const std::vector<double> g = flatten(h.gradient());
  double gg = 0;
  for (double x : g) gg += x * x;
  p.gradient_norm = std::sqrt(gg);
  if (gg > 0) {
    double in = 0;
    for (const auto& u : t.vectors) {
      double d = 0;
      for (std::size_t i = 0; i < g.size(); ++i) d += u[i] * g[i];
      in += d * d;
    }
    p.gradient_share = in / gg;
  }
  return p;
}

}  // namespace claims
