#pragma once
// Flatten and Unflatten, PyTorch's nn.Flatten and nn.Unflatten: views that merge or split
// dims (stateless; same in train and eval mode).
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Merges dims start_dim..end_dim (inclusive, negative counts from the end) into one,
/// as a view: (N, C, H, W) -> (N, C·H·W) with the defaults start_dim = 1, end_dim = -1.
/// Throws std::invalid_argument naming the shape when a dim is out of range or
/// start_dim > end_dim (after wrapping). A 0-d input becomes shape (1), like PyTorch.
class Flatten : public Module {
 public:
  /// Flattens dims start_dim..end_dim (checked at forward, against the input's rank).
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  ///@{
  /// The first and last dim merged (inclusive; negative counts from the end).
  std::int64_t start_dim, end_dim;
  ///@}
};

/// Unflatten, PyTorch's nn.Unflatten: splits dim `dim` into `unflattened_size` (its product
/// must equal that dim's size), as a view. (N, 784) -> (N, 1, 28, 28) for Unflatten(1, {1, 28, 28}).
/// forward throws std::invalid_argument naming both shapes when the sizes do not match.
class Unflatten : public Module {
 public:
  /// Splits dim `dim` (negative counts from the end) into `unflattened_size` (checked at
  /// forward).
  Unflatten(std::int64_t dim, Shape unflattened_size) : dim(dim), unflattened_size(std::move(unflattened_size)) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim) + ", unflattened_size=" + shape_str(unflattened_size); }

  /// The dim split.
  std::int64_t dim;
  /// The sizes it is split into.
  Shape unflattened_size;
};

}  // namespace tapegrad::layers
