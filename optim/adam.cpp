#include "optim/adam.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/parallel.h"
#include "layers/hooks.h"

namespace tapegrad::optim {

Adam::Adam(std::vector<Tensor> params, AdamOptions options) { add_param_group(std::move(params), options); }
Adam::Adam(std::vector<Group> groups) {
  for (auto& g : groups) add_param_group(std::move(g.params), g.options);
}
AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam(true) {
  add_param_group(std::move(params), options);
}
AdamW::AdamW(std::vector<Group> groups) : Adam(true) {
  for (auto& g : groups) add_param_group(std::move(g.params), g.options);
}

void Adam::validate(const AdamOptions& o) const {
  const std::string who = type_name() + ": invalid ";
  if (!(o.lr >= 0)) throw std::invalid_argument(who + "learning rate " + detail::num(o.lr) + " (expected >= 0)");
  if (!(o.eps >= 0)) throw std::invalid_argument(who + "epsilon " + detail::num(o.eps) + " (expected >= 0)");
  if (!(o.betas.first >= 0 && o.betas.first < 1))
    throw std::invalid_argument(who + "beta at index 0: " + detail::num(o.betas.first) + " (expected in [0, 1))");
  if (!(o.betas.second >= 0 && o.betas.second < 1))
    throw std::invalid_argument(who + "beta at index 1: " + detail::num(o.betas.second) + " (expected in [0, 1))");
  if (!(o.weight_decay >= 0))
    throw std::invalid_argument(who + "weight_decay " + detail::num(o.weight_decay) + " (expected >= 0)");
}

void Adam::step() {
  layers::hooks::run_step_hooks(parameters());
  std::size_t index = 0;
  for (auto& group : groups_) {
    const AdamOptions o = group.options;
    for (const Tensor& p : group.params) {
      auto& st = state(index++);
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      check_grad(p, grad, index - 1);
      if (!st.count("step")) {
        st["step"] = Tensor::from_int64({0}, {});
        st["exp_avg"] = Tensor::zeros(p.shape(), p.dtype());
        st["exp_avg_sq"] = Tensor::zeros(p.shape(), p.dtype());
      }
      if (o.amsgrad && !st.count("max_exp_avg_sq")) st["max_exp_avg_sq"] = Tensor::zeros(p.shape(), p.dtype());
      const std::int64_t t = ++st["step"].data<std::int64_t>()[0];
      // Scalars in double, as PyTorch computes them in Python floats.
      const double b1 = o.betas.first, b2 = o.betas.second;
      const double step_size = o.lr / (1 - std::pow(b1, static_cast<double>(t)));
      const double bc2_sqrt = std::sqrt(1 - std::pow(b2, static_cast<double>(t)));
      TAPEGRAD_DISPATCH_FLOAT(p.dtype(), "Adam::step", [&] {
        using T = scalar_t;
        T* w = p.data<T>();
        const T* g = grad.data<T>();
        T* m = st["exp_avg"].data<T>();
        T* v = st["exp_avg_sq"].data<T>();
        T* vmax = o.amsgrad ? st["max_exp_avg_sq"].data<T>() : nullptr;
        const T decay = static_cast<T>(1 - o.lr * o.weight_decay), wd = static_cast<T>(o.weight_decay);
        const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2);
        const T one_b1 = static_cast<T>(1 - b1), one_b2 = static_cast<T>(1 - b2);
        const T neg_step = static_cast<T>(-step_size), bc2 = static_cast<T>(bc2_sqrt), eps = static_cast<T>(o.eps);
        const bool l2 = !decoupled_ && o.weight_decay != 0, decay_p = decoupled_ && o.weight_decay != 0;
        parallel_for(p.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) {
            if (decay_p) w[i] = w[i] * decay;
            T gi = o.maximize ? -g[i] : g[i];
            if (l2) gi = gi + wd * w[i];
            m[i] = m[i] * tb1 + one_b1 * gi;
            v[i] = v[i] * tb2 + one_b2 * gi * gi;
            T vh = v[i];
            if (vmax) vh = vmax[i] = std::max(vmax[i], v[i]);
            const T denom = std::sqrt(vh) / bc2 + eps;
            w[i] = w[i] + neg_step * m[i] / denom;
          }
        });
      });
    }
  }
}

}  // namespace tapegrad::optim
