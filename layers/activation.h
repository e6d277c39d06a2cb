#pragma once
// Activation modules (stateless; same in train and eval mode).
#include "layers/module.h"

namespace tapegrad::layers {

/// max(x, 0) element-wise; any shape. ReLU'(0) = 0.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

}  // namespace tapegrad::layers
