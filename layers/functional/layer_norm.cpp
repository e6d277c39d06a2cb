#include <tapegrad/layers/functional/layer_norm.h>

#include <stdexcept>
#include <string>

#include <tapegrad/layers/functional/grouped_norm.h>

namespace tapegrad::layers::functional {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (!x.defined()) throw std::invalid_argument("layer_norm: the input is undefined");
  if (normalized_shape.empty())
    throw std::invalid_argument("layer_norm: normalized_shape must name at least one dim, got []");
  const std::int64_t k = static_cast<std::int64_t>(normalized_shape.size());
  bool match = x.dim() >= k;
  for (std::int64_t i = 0; match && i < k; ++i) match = x.size(x.dim() - k + i) == normalized_shape[i];
  if (!match)
    throw std::invalid_argument("layer_norm: expected input with trailing dims " + shape_str(normalized_shape) +
                                " (normalized_shape), got input of shape " + shape_str(x.shape()));
  for (const auto* t : {&weight, &bias})
    if (t->defined() && t->shape() != normalized_shape)
      throw std::invalid_argument(std::string("layer_norm: expected ") + (t == &weight ? "weight" : "bias") +
                                  " of shape " + shape_str(normalized_shape) + " (normalized_shape), got " +
                                  shape_str(t->shape()));
  // Rows of D values, one affine "channel" per element: C = D, S = 1, G = 1.
  return detail::grouped_norm(x, numel_of(normalized_shape), 1, 1, weight, bias, eps, "layer_norm");
}

}  // namespace tapegrad::layers::functional
