#pragma once
// Stochastic gradient descent with momentum, PyTorch's torch.optim.SGD.
#include <vector>

#include <tapegrad/optim/optimizer.h>

namespace tapegrad::optim {

/// Defaults as in PyTorch (which requires lr; here it defaults to 0.01).
struct SGDOptions {
  /// Learning rate, >= 0.
  double lr = 0.01;
  /// Momentum factor, >= 0 (0: plain SGD, no buffer).
  double momentum = 0.0;
  /// Dampening of the momentum: buf = momentum·buf + (1 - dampening)·d.
  double dampening = 0.0;
  /// L2 penalty added to the gradient, >= 0.
  double weight_decay = 0.0;
  /// Nesterov momentum (needs momentum > 0 and dampening 0).
  bool nesterov = false;
  /// Ascend the objective instead of descending.
  bool maximize = false;
  /// Calls f(name, field) for every option: the names of the optimizer state_dict's
  /// "param_groups.<g>.<opt>" keys.
  template <class F> void visit(F&& f) {
    f("lr", lr), f("momentum", momentum), f("dampening", dampening), f("weight_decay", weight_decay);
    f("nesterov", nesterov), f("maximize", maximize);
  }
};

/// Update per parameter p with gradient g (PyTorch 1.13, torch/optim/sgd.py):
///   d = maximize ? -g : g;  d = d + weight_decay·p;
///   with momentum: buf = d on the first step, buf = momentum·buf + (1 - dampening)·d after;
///                  d = nesterov ? d + momentum·buf : buf;
///   p = p - lr·d.
/// Parameters without a gradient are skipped. State: "momentum_buffer" (momentum != 0).
/// Throws std::invalid_argument (naming the value) for lr < 0, momentum < 0,
/// weight_decay < 0, or nesterov without momentum > 0 and dampening == 0.
class SGD : public OptimizerWithOptions<SGDOptions> {
 public:
  /// One group holding `params`.
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  /// Several groups, each with its own options: SGD({{body, o}, {head, o_head}}).
  explicit SGD(std::vector<Group> groups);
  void step() override;
  std::string type_name() const override { return "SGD"; }

 protected:
  void validate(const SGDOptions& o) const override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
};

}  // namespace tapegrad::optim
