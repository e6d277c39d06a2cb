#pragma once
// Identity, PyTorch's nn.Identity.
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Returns its input unchanged (the same tensor); a placeholder in Sequential.
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Identity"; }
};

}  // namespace tapegrad::layers
