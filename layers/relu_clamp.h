#pragma once
// ReLU followed by Clamp as one module, for layers::fuse_modules.
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// ReLU → Clamp(lo, hi) with lo <= 0 <= hi as one module and one op: y = clamp(relu(x), lo, hi)
/// = min(max(x, 0), hi), core's relu_clamp (one tape node "relu_clamp", the same bits as the
/// two layers run apart, forward and backward). Any shape, float32/float64; same in train and
/// eval. Made by layers::fuse_modules, which leaves Identity in the Clamp's place; a forward
/// hook on it sees the clamped output. Throws std::invalid_argument unless lo <= 0 <= hi (NaN
/// bounds included).
class ReLUClamp : public Module {
 public:
  /// relu then clamp to [lo, hi]; throws unless lo <= 0 <= hi.
  ReLUClamp(double lo, double hi);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLUClamp"; }
  /// "min=-10, max=10", as Clamp.
  std::string extra_repr() const override;

  ///@{
  /// The Clamp's bounds: lo <= 0 <= hi.
  const double lo, hi;
  ///@}
};

}  // namespace tapegrad::layers
