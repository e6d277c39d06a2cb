#include <tapegrad/layers/layer_norm.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/layers/functional/layer_norm.h>

namespace tapegrad::layers {

LayerNorm::LayerNorm(const LayerNormOptions& o)
    : LayerNorm(o.normalized_shape(), o.eps(), o.elementwise_affine(), o.bias(), o.dtype()) {}

LayerNorm::LayerNorm(Shape shape, double e, bool affine, bool use_bias, Dtype dtype)
    : normalized_shape(std::move(shape)), eps(e), elementwise_affine(affine) {
  if (normalized_shape.empty()) throw std::invalid_argument("LayerNorm: normalized_shape must not be empty");
  for (auto d : normalized_shape)
    if (d <= 0)
      throw std::invalid_argument("LayerNorm: normalized_shape must have positive dims, got " +
                                  shape_str(normalized_shape));
  if (!(eps >= 0 && std::isfinite(eps))) throw std::invalid_argument("LayerNorm: eps must be >= 0 and finite, got " + std::to_string(eps));
  if (affine) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape, dtype));
    if (use_bias) bias = register_parameter("bias", Tensor::zeros(normalized_shape, dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (x.defined()) check_input_dtype(x, weight);
  return functional::layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < normalized_shape.size(); ++i) os << (i ? ", " : "") << normalized_shape[i];
  os << (normalized_shape.size() == 1 ? ",)" : ")") << ", eps=" << eps
     << ", elementwise_affine=" << (elementwise_affine ? "True" : "False");
  return os.str();
}

}  // namespace tapegrad::layers
