#pragma once
// RMSprop, PyTorch's torch.optim.RMSprop.
#include <vector>

#include <tapegrad/optim/optimizer.h>

namespace tapegrad::optim {

/// Defaults as in PyTorch: lr 1e-2, alpha 0.99, eps 1e-8, weight_decay 0, momentum 0,
/// centered false, maximize false.
struct RMSpropOptions {
  /// Learning rate, >= 0.
  double lr = 1e-2;
  /// Smoothing constant of the squared-gradient average, >= 0.
  double alpha = 0.99;
  /// Added to the denominator for numerical stability, >= 0.
  double eps = 1e-8;
  /// L2 penalty, >= 0.
  double weight_decay = 0.0;
  /// Momentum factor, >= 0 (0: no momentum buffer).
  double momentum = 0.0;
  /// Normalise by the estimated variance of the gradient (Graves 2013) instead of its
  /// second moment.
  bool centered = false;
  /// Ascend the objective instead of descending.
  bool maximize = false;
  /// Calls f(name, field) for every option: the names of the optimizer state_dict's
  /// "param_groups.<g>.<opt>" keys.
  template <class F> void visit(F&& f) {
    f("lr", lr), f("alpha", alpha), f("eps", eps), f("weight_decay", weight_decay), f("momentum", momentum);
    f("centered", centered), f("maximize", maximize);
  }
};

/// RMSprop (Hinton, Coursera lecture 6e; centered form from Graves 2013, eq. 38-45) as
/// PyTorch 1.13 computes it, per parameter p:
///   g = maximize ? -grad : grad;  g = g + weight_decay·p
///   s = alpha·s + (1 - alpha)·g²
///   centered: a = alpha·a + (1 - alpha)·g;  avg = sqrt(s - a²) + eps;  else avg = sqrt(s) + eps
///   momentum > 0: buf = momentum·buf + g/avg;  p = p - lr·buf;  else p = p - lr·g/avg
/// State: "step" (int64 scalar, in [0, 2^53] at load, saturating at INT64_MAX when stepped), "square_avg", "momentum_buffer" (momentum > 0),
/// "grad_avg" (centered). Throws std::invalid_argument (naming the value) for lr < 0,
/// eps < 0, momentum < 0, weight_decay < 0, alpha < 0.
class RMSprop : public OptimizerWithOptions<RMSpropOptions> {
 public:
  /// One group of `params` with `options`. Throws std::invalid_argument for invalid options
  /// or parameters that are not float leaves or appear twice.
  explicit RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  /// One group per entry, each with its own options; same checks.
  explicit RMSprop(std::vector<Group> groups);
  void step() override;
  std::string type_name() const override { return "RMSprop"; }

 protected:
  void validate(const RMSpropOptions& o) const override;
  std::vector<std::string> state_names() const override {
    return {"step", "square_avg", "momentum_buffer", "grad_avg"};
  }
  std::vector<std::string> nonnegative_state_names() const override { return {"square_avg"}; }
};

}  // namespace tapegrad::optim
