#include <tapegrad/layers/flatten.h>

#include <stdexcept>

#include <tapegrad/core/ops/shape_ops.h>

namespace tapegrad::layers {

Flatten::Flatten(std::int64_t s, std::int64_t e) : start_dim(s), end_dim(e) {}

Tensor Flatten::forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("Flatten: the input is undefined");
  if (x.dim() == 0) return reshape(x, {1});
  const std::int64_t r = x.dim();
  auto wrap = [&](std::int64_t d, const char* what) {
    const std::int64_t w = d < 0 ? d + r : d;
    if (w < 0 || w >= r)
      throw std::invalid_argument(std::string("Flatten: ") + what + " " + std::to_string(d) +
                                  " is out of range for input of shape " + shape_str(x.shape()));
    return w;
  };
  const std::int64_t s = wrap(start_dim, "start_dim"), e = wrap(end_dim, "end_dim");
  if (s > e)
    throw std::invalid_argument("Flatten: start_dim " + std::to_string(start_dim) + " comes after end_dim " +
                                std::to_string(end_dim) + " for input of shape " + shape_str(x.shape()));
  Shape out;
  for (std::int64_t d = 0; d < s; ++d) out.push_back(x.size(d));
  out.push_back(numel_of(Shape(x.shape().begin() + s, x.shape().begin() + e + 1)));
  for (std::int64_t d = e + 1; d < r; ++d) out.push_back(x.size(d));
  return reshape(x, out);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Tensor Unflatten::forward(const Tensor& x) {
  const std::int64_t d = dim < 0 ? dim + x.dim() : dim;
  for (std::int64_t s : unflattened_size)
    if (s < 0)
      throw std::invalid_argument("Unflatten: expected sizes >= 0 in unflattened_size, got " +
                                  shape_str(unflattened_size));
  // the product of the non-zero sizes, zeros or not: a later view multiplies them
  if (numel_overflows(unflattened_size))
    throw std::invalid_argument("Unflatten: expected an unflattened_size whose product fits in 64 bits, got " +
                                shape_str(unflattened_size));
  const std::int64_t m = numel_of(unflattened_size);
  if (d < 0 || d >= x.dim() || x.size(d) != m)
    throw std::invalid_argument("Unflatten: expected dim " + std::to_string(dim) + " of size " + std::to_string(m) +
                                " (unflattened_size " + shape_str(unflattened_size) + "), got input of shape " +
                                shape_str(x.shape()));
  Shape s(x.shape().begin(), x.shape().begin() + d);
  s.insert(s.end(), unflattened_size.begin(), unflattened_size.end());
  s.insert(s.end(), x.shape().begin() + d + 1, x.shape().end());
  if (numel_overflows(s))
    throw std::invalid_argument("Unflatten: the output shape " + shape_str(s) + " (input " + shape_str(x.shape()) +
                                ", unflattened_size " + shape_str(unflattened_size) +
                                ") has more elements than a 64-bit count holds (size overflow)");
  return reshape(x, s);
}

}  // namespace tapegrad::layers
