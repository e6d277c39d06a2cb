#pragma once
// Activation modules and shape helpers (stateless; same in train and eval mode).
// Every one accepts any input shape unless stated; ops live in core/ops/activation.h.
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// max(x, 0) element-wise; any shape. ReLU'(0) = 0.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

/// 1 / (1 + e^(-x)) element-wise; any shape.
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sigmoid"; }
};

/// tanh(x) element-wise; any shape.
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Tanh"; }
};

/// x for x > 0, negative_slope·x otherwise (default 0.01, PyTorch's); any shape.
/// The derivative at 0 is negative_slope. Throws std::invalid_argument for a
/// non-finite slope.
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  double negative_slope;
};

/// GELU (Hendrycks & Gimpel 2016); any shape. approximate = "none" (default): the exact
/// erf form ½·x·(1 + erf(x/√2)); "tanh": PyTorch's tanh approximation. Any other value
/// throws std::invalid_argument naming it.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;
  std::string approximate;
};

/// Returns its input unchanged (the same tensor); a placeholder in Sequential.
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Identity"; }
};

/// Merges dims start_dim..end_dim (inclusive, negative counts from the end) into one,
/// as a view: (N, C, H, W) -> (N, C·H·W) with the defaults start_dim = 1, end_dim = -1.
/// Throws std::invalid_argument naming the shape when a dim is out of range or
/// start_dim > end_dim (after wrapping). A 0-d input becomes shape (1), like PyTorch.
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  std::int64_t start_dim, end_dim;
};

}  // namespace tapegrad::layers
