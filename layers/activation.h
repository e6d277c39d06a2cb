#pragma once
// Activation modules (stateless; same in train and eval mode). Every one accepts any
// input shape unless stated; ops live in core/ops/activation.h. Flatten and Unflatten:
// layers/flatten.h; Identity: layers/identity.h.
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
  /// LeakyReLU with `negative_slope` (finite, else std::invalid_argument).
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  double negative_slope;  ///< the slope for x <= 0
};

/// GELU (Hendrycks & Gimpel 2016); any shape. approximate = "none" (default): the exact
/// erf form ½·x·(1 + erf(x/√2)); "tanh": PyTorch's tanh approximation. Any other value
/// throws std::invalid_argument naming it.
class GELU : public Module {
 public:
  /// GELU in the given form, "none" or "tanh" (else std::invalid_argument).
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;
  std::string approximate;  ///< "none" (exact erf form) or "tanh"
};

}  // namespace tapegrad::layers
