#include <tapegrad/layers/flatten.h>

#include <stdexcept>

#include <tapegrad/core/ops/shape_ops.h>

namespace tapegrad::layers {

Tensor Unflatten::forward(const Tensor& x) {
  const std::int64_t d = dim < 0 ? dim + x.dim() : dim;
  std::int64_t m = 1;
  bool overflow = false;
  for (std::int64_t s : unflattened_size) {
    if (s < 0)
      throw std::invalid_argument("Unflatten: expected sizes >= 0 in unflattened_size, got " +
                                  shape_str(unflattened_size));
    overflow |= __builtin_mul_overflow(m, s, &m);
  }
  if (overflow)
    throw std::invalid_argument("Unflatten: expected an unflattened_size whose product fits in 64 bits, got " +
                                shape_str(unflattened_size));
  if (d < 0 || d >= x.dim() || x.size(d) != m)
    throw std::invalid_argument("Unflatten: expected dim " + std::to_string(dim) + " of size " + std::to_string(m) +
                                " (unflattened_size " + shape_str(unflattened_size) + "), got input of shape " +
                                shape_str(x.shape()));
  Shape s(x.shape().begin(), x.shape().begin() + d);
  s.insert(s.end(), unflattened_size.begin(), unflattened_size.end());
  s.insert(s.end(), x.shape().begin() + d + 1, x.shape().end());
  return reshape(x, s);
}

}  // namespace tapegrad::layers
