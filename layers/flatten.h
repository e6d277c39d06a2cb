#pragma once
// Flatten and Unflatten, PyTorch's nn.Flatten and nn.Unflatten (Flatten itself is declared
// in layers/activation.h).
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Unflatten, PyTorch's nn.Unflatten: splits dim `dim` into `unflattened_size` (its product
/// must equal that dim's size), as a view. (N, 784) -> (N, 1, 28, 28) for Unflatten(1, {1, 28, 28}).
/// forward throws std::invalid_argument naming both shapes when the sizes do not match.
class Unflatten : public Module {
 public:
  Unflatten(std::int64_t dim, Shape unflattened_size) : dim(dim), unflattened_size(std::move(unflattened_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim) + ", unflattened_size=" + shape_str(unflattened_size); }

  std::int64_t dim;
  Shape unflattened_size;
};

}  // namespace tapegrad::layers
