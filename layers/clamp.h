#pragma once
// Activation clipping as a module: the chapter clips every hidden activation to [-10, 10].
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// y = clamp(x, lo, hi) element-wise (core/ops/unary.h); any shape, float32/float64; same in
/// train and eval. Backward as torch.clamp: dy passes where lo <= x <= hi, 0 elsewhere.
/// Throws std::invalid_argument when lo > hi or a bound is NaN.
class Clamp : public Module {
 public:
  /// Clamps to [lo, hi]; throws std::invalid_argument when lo > hi or a bound is NaN.
  Clamp(double lo, double hi);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Clamp"; }
  std::string extra_repr() const override;

  ///@{
  /// The bounds: lo <= hi.
  double lo, hi;
  ///@}
};

/// "min=-10, max=10": the extra_repr of Clamp and of ReLUClamp.
std::string clamp_bounds_repr(double lo, double hi);

}  // namespace tapegrad::layers
