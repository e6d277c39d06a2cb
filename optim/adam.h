#pragma once
// Adam and AdamW, PyTorch's torch.optim.Adam / torch.optim.AdamW.
#include <utility>
#include <vector>

#include <tapegrad/optim/optimizer.h>

namespace tapegrad::optim {

/// Defaults as in PyTorch: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0
/// (AdamWOptions: 1e-2), amsgrad false, maximize false.
struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
  template <class F> void visit(F&& f) {
    f("lr", lr), f("beta1", betas.first), f("beta2", betas.second), f("eps", eps);
    f("weight_decay", weight_decay), f("amsgrad", amsgrad), f("maximize", maximize);
  }
};
struct AdamWOptions : AdamOptions {
  AdamWOptions() { weight_decay = 1e-2; }
};

/// Adam (Kingma & Ba 2015, Algorithm 1) as PyTorch 1.13 computes it, per parameter p:
///   t += 1;  g = maximize ? -grad : grad;  g = g + weight_decay·p   (L2, Adam only)
///   m = b1·m + (1 - b1)·g;  v = b2·v + (1 - b2)·g²;  v̂ = amsgrad ? max(v̂, v) : v
///   p = p - lr/(1 - b1^t) · m / (sqrt(v̂)/sqrt(1 - b2^t) + eps)
/// AdamW (Loshchilov & Hutter 2019) replaces the L2 term by p = p·(1 - lr·weight_decay)
/// before the update. State: "step" (int64 scalar), "exp_avg", "exp_avg_sq",
/// "max_exp_avg_sq" (amsgrad). Throws std::invalid_argument (naming the value) for
/// lr < 0, eps < 0, a beta outside [0, 1), weight_decay < 0.
class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<Group> groups);
  void step() override;
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  explicit Adam(bool decoupled) : decoupled_(decoupled) {}
  void validate(const AdamOptions& o) const override;
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
  std::vector<std::string> nonnegative_state_names() const override { return {"exp_avg_sq", "max_exp_avg_sq"}; }

 private:
  bool decoupled_ = false;
};

/// Adam with decoupled weight decay (see Adam).
class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<Group> groups);
};

}  // namespace tapegrad::optim
