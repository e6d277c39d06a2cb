#include <tapegrad/layers/functional/kernels/batch_norm_checks.h>

#include <cmath>
#include <stdexcept>

#include <tapegrad/core/dtype.h>
#include <tapegrad/core/shape.h>

namespace tapegrad::layers::functional::detail {

BnDims bn_dims_of(const Tensor& x) {
  std::int64_t S = 1;
  for (std::int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  return {x.size(0), x.size(1), S};
}

namespace {

void check_channel_tensor(const std::string& who, const Tensor& t, const char* what, const Tensor& x, std::int64_t C) {
  if (!t.defined()) return;
  if (t.dim() != 1 || t.size(0) != C)  // compared without building a Shape (no allocation per call)
    throw std::invalid_argument(who + ": expected " + what + " of shape [" + std::to_string(C) +
                                "] for input of shape " + shape_str(x.shape()) + ", got " + shape_str(t.shape()));
  if (t.dtype() != x.dtype())
    throw std::invalid_argument(who + ": " + what + " has dtype " + dtype_name(t.dtype()) + " but the input is " +
                                dtype_name(x.dtype()));
}

}  // namespace

BnDims bn_check_common(const std::string& who, const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const RunningStats& running, double eps) {
  if (!x.defined() || x.dim() < 2)
    throw std::invalid_argument(who + ": expected input of shape (N, C, *), got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(who + ": expected a float input, got " + dtype_name(x.dtype()));
  const BnDims d = bn_dims_of(x);
  check_channel_tensor(who, weight, "weight", x, d.C);
  check_channel_tensor(who, bias, "bias", x, d.C);
  if (!(eps >= 0 && std::isfinite(eps)))
    throw std::invalid_argument(who + ": eps must be >= 0 and finite, got " + std::to_string(eps));
  running.check(who, x);
  return d;
}

}  // namespace tapegrad::layers::functional::detail
