#include <tapegrad/layers/group_norm.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/layers/functional/group_norm.h>

namespace tapegrad::layers {

GroupNorm::GroupNorm(const GroupNormOptions& o)
    : GroupNorm(o.num_groups(), o.num_channels(), o.eps(), o.affine(), o.dtype()) {}

GroupNorm::GroupNorm(std::int64_t g, std::int64_t c, double e, bool aff, Dtype dtype)
    : num_groups(g), num_channels(c), eps(e), affine(aff) {
  if (g <= 0 || c <= 0)
    throw std::invalid_argument("GroupNorm: num_groups and num_channels must be positive, got num_groups=" +
                                std::to_string(g) + ", num_channels=" + std::to_string(c));
  if (c % g != 0)
    throw std::invalid_argument("GroupNorm: num_channels (" + std::to_string(c) + ") must be divisible by num_groups (" +
                                std::to_string(g) + ")");
  if (!(eps >= 0 && std::isfinite(eps))) throw std::invalid_argument("GroupNorm: eps must be >= 0 and finite, got " + std::to_string(eps));
  if (aff) {
    weight = register_parameter("weight", Tensor::ones({c}, dtype));
    bias = register_parameter("bias", Tensor::zeros({c}, dtype));
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("GroupNorm: the input is undefined");
  if (x.dim() < 2 || x.size(1) != num_channels)
    throw std::invalid_argument("GroupNorm: expected input of shape (N, " + std::to_string(num_channels) +
                                ", *), got " + shape_str(x.shape()));
  check_input_dtype(x, weight);
  return functional::group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  std::ostringstream os;
  os << num_groups << ", " << num_channels << ", eps=" << eps << ", affine=" << (affine ? "True" : "False");
  return os.str();
}

}  // namespace tapegrad::layers
