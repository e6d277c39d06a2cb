// Batch renormalisation's train-mode forward: r and d from the batch and running statistics,
// then batch_norm's fused kernel and tape node with the effective affine γ·r, γ·d + β.
#include <tapegrad/layers/functional/batch_renorm.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/layers/functional/batch_norm.h>

namespace tapegrad::layers::functional {

void check_renorm_clipping(double rmax, double dmax) {
  if (!(rmax >= 1.0)) throw std::invalid_argument("BatchRenorm: rmax must be >= 1, got " + std::to_string(rmax));
  if (!(dmax >= 0.0)) throw std::invalid_argument("BatchRenorm: dmax must be >= 0, got " + std::to_string(dmax));
}

Tensor batch_renorm(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running, double eps,
                    double rmax, double dmax, Tensor& r_out, Tensor& d_out, const std::string& who) {
  check_renorm_clipping(rmax, dmax);
  if (!x.defined() || x.dim() < 2)
    throw std::invalid_argument(who + ": expected input of shape (N, C, *), got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  if (!running.defined())
    throw std::invalid_argument(who + ": needs running_mean and running_var to renormalise against");
  if (x.dtype() != running.running_mean.dtype())  // the buffers' dtype follows Module::to
    throw std::invalid_argument(who + ": input dtype " + dtype_name(x.dtype()) + " does not match the " +
                                dtype_name(running.running_mean.dtype()) + " running statistics (convert with .to())");
  const std::int64_t C = x.size(1);
  Tensor mu_b, var_b;  // float64 (C), biased
  batch_moments(x, mu_b, var_b);
  const std::vector<double> mu = mu_b.to_vector(), var = var_b.to_vector();
  const std::vector<double> rm = running.running_mean.to_vector(), rv = running.running_var.to_vector();
  std::vector<double> r(static_cast<std::size_t>(C)), d(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) {
    const double sigma_run = std::sqrt(rv[c] + eps);
    r[c] = std::clamp(std::sqrt(var[c] + eps) / sigma_run, 1.0 / rmax, rmax);
    d[c] = std::clamp((mu[c] - rm[c]) / sigma_run, -dmax, dmax);
  }
  Tensor r_t = Tensor::from_vector(r, {C}, Dtype::Float64), d_t = Tensor::from_vector(d, {C}, Dtype::Float64);
  // γ·(x̂·r + d) + β = (γ·r)·x̂ + (γ·d + β): BatchNorm's kernel with an effective affine.
  // r, d carry no gradient; the tape's mul/add route dγ' = Σdy·x̂ and dβ' = Σdy to
  // dγ = r·Σdy·x̂ + d·Σdy and dβ = Σdy.
  const Tensor rt = r_t.to(x.dtype()), dt = d_t.to(x.dtype());
  Tensor w_eff = weight.defined() ? mul(weight, rt) : rt;
  Tensor b_eff = weight.defined() ? add(mul(weight, dt), bias) : dt;
  Tensor out = batch_norm(x, w_eff, b_eff, running, true, eps, who);  // checks the rest, updates `running`
  r_out = std::move(r_t);
  d_out = std::move(d_t);
  return out;
}

}  // namespace tapegrad::layers::functional
