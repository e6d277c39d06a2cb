#include "layers/batch_renorm.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/ops/elementwise.h"
#include "layers/functional/batch_norm.h"

namespace tapegrad::layers {
namespace functional {

void check_renorm_clipping(double rmax, double dmax) {
  if (!(rmax >= 1.0)) throw std::invalid_argument("BatchRenorm: rmax must be >= 1, got " + std::to_string(rmax));
  if (!(dmax >= 0.0)) throw std::invalid_argument("BatchRenorm: dmax must be >= 0, got " + std::to_string(dmax));
}

Tensor batch_renorm_train(BatchNormBase& bn, const Tensor& x, double rmax, double dmax, Tensor& r_out,
                          Tensor& d_out) {
  const std::int64_t C = x.size(1);
  const std::int64_t m = x.numel() / C;
  check_batch_norm_options(bn.type_name(), bn.options);
  if (m <= 1)  // refuse before touching any buffer
    throw std::invalid_argument(bn.type_name() + ": expected more than 1 value per channel when training, got input "
                                "of shape " + shape_str(x.shape()) +
                                "; call eval() to run a single sample through running statistics");
  if (x.dtype() != bn.running_mean.dtype())  // the buffers' dtype follows Module::to
    throw std::invalid_argument(bn.type_name() + ": input dtype " + dtype_name(x.dtype()) +
                                " does not match the module's " + dtype_name(bn.running_mean.dtype()) +
                                " (convert with .to() or Module::to())");
  const double eps = bn.options.eps;
  Tensor mu_b, var_b;  // float64 (C), biased
  batch_moments(x, mu_b, var_b);
  const std::vector<double> mu = mu_b.to_vector(), var = var_b.to_vector();
  const std::vector<double> rm = bn.running_mean.to_vector(), rv = bn.running_var.to_vector();
  std::vector<double> r(static_cast<std::size_t>(C)), d(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) {
    const double sigma_run = std::sqrt(rv[c] + eps);
    r[c] = std::clamp(std::sqrt(var[c] + eps) / sigma_run, 1.0 / rmax, rmax);
    d[c] = std::clamp((mu[c] - rm[c]) / sigma_run, -dmax, dmax);
  }
  r_out = Tensor::from_vector(r, {C}, Dtype::Float64);
  d_out = Tensor::from_vector(d, {C}, Dtype::Float64);
  // γ·(x̂·r + d) + β = (γ·r)·x̂ + (γ·d + β): BatchNorm's kernel with an effective affine.
  // r, d carry no gradient; the tape's mul/add route dγ' = Σdy·x̂ and dβ' = Σdy to
  // dγ = r·Σdy·x̂ + d·Σdy and dβ = Σdy.
  const Tensor rt = r_out.to(x.dtype()), dt = d_out.to(x.dtype());
  Tensor w_eff = bn.weight.defined() ? mul(bn.weight, rt) : rt;
  Tensor b_eff = bn.weight.defined() ? add(mul(bn.weight, dt), bn.bias) : dt;
  std::int64_t& nbt = bn.num_batches_tracked.data<std::int64_t>()[0];
  const double factor = bn.options.momentum ? *bn.options.momentum : 1.0 / static_cast<double>(nbt + 1);
  Tensor out = batch_norm(x, bn.running_mean, bn.running_var, w_eff, b_eff, true, factor, eps);
  ++nbt;
  return out;
}

}  // namespace functional

namespace {
std::string renorm_repr(const std::string& base, double rmax, double dmax) {
  std::ostringstream os;
  os << base << ", rmax=" << rmax << ", dmax=" << dmax;
  return os.str();
}
}  // namespace

template <class BN>
BatchRenorm<BN>::BatchRenorm(std::int64_t c, BatchNormOptions o, double rmax, double dmax)
    : BN(c, o), rmax_(rmax), dmax_(dmax) {
  functional::check_renorm_clipping(rmax, dmax);
}
template <class BN>
void BatchRenorm<BN>::set_clipping(double rmax, double dmax) {
  functional::check_renorm_clipping(rmax, dmax);
  rmax_ = rmax;
  dmax_ = dmax;
}
template <class BN>
Tensor BatchRenorm<BN>::forward(const Tensor& x) {
  if (!this->is_training() || !this->options.track_running_stats) return BN::forward(x);
  if (!x.defined()) throw std::invalid_argument(this->type_name() + ": the input is undefined");
  this->check_input(x);
  return functional::batch_renorm_train(*this, x, rmax_, dmax_, last_r, last_d);
}
template <class BN>
std::string BatchRenorm<BN>::extra_repr() const {
  return renorm_repr(BN::extra_repr(), rmax_, dmax_);
}

template class BatchRenorm<BatchNorm1d>;
template class BatchRenorm<BatchNorm2d>;

}  // namespace tapegrad::layers
