#pragma once
// Flatten, PyTorch's nn.Flatten.
#include "layers/module.h"

namespace tapegrad::layers {

/// Merges dims start_dim..end_dim (defaults 1 and -1: everything but the batch) into one,
/// as a view sharing the input's storage; the gradient is reshaped back.
/// (N, C, H, W) -> (N, C·H·W). Throws std::invalid_argument (from flatten) when a dim is
/// out of range or start_dim comes after end_dim.
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override {
    return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
  }

  std::int64_t start_dim, end_dim;
};

}  // namespace tapegrad::layers
