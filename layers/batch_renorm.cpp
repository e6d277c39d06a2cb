#include <tapegrad/layers/batch_renorm.h>

#include <sstream>
#include <stdexcept>

#include <tapegrad/layers/functional/batch_renorm.h>

namespace tapegrad::layers {

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
  this->check_dtype(x);
  return functional::batch_renorm(x, this->weight, this->bias, this->running_stats(), this->options.eps, rmax_, dmax_,
                                  last_r, last_d, this->type_name());
}
template <class BN>
std::string BatchRenorm<BN>::extra_repr() const {
  return renorm_repr(BN::extra_repr(), rmax_, dmax_);
}

template class BatchRenorm<BatchNorm1d>;
template class BatchRenorm<BatchNorm2d>;

}  // namespace tapegrad::layers
