#include <tapegrad/optim/adam.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/counter.h>
#include <tapegrad/optim/kernels/update.h>

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
  for_each_param_with_grad([&](const Tensor& p, const Tensor& grad, ParamState& st, const AdamOptions& o) {
    if (!st.count("step")) {
      st["step"] = Tensor::from_int64({0}, {});
      st["exp_avg"] = Tensor::zeros(p.shape(), p.dtype());
      st["exp_avg_sq"] = Tensor::zeros(p.shape(), p.dtype());
    }
    if (o.amsgrad && !st.count("max_exp_avg_sq")) st["max_exp_avg_sq"] = Tensor::zeros(p.shape(), p.dtype());
    const std::int64_t t = saturating_increment(st["step"].data<std::int64_t>()[0]);
    // Scalars in double, as PyTorch computes them in Python floats.
    const double b1 = o.betas.first, b2 = o.betas.second;
    const double step_size = o.lr / (1 - std::pow(b1, static_cast<double>(t)));
    const double bc2_sqrt = std::sqrt(1 - std::pow(b2, static_cast<double>(t)));
    TAPEGRAD_DISPATCH_FLOAT(p.dtype(), "Adam::step", [&] {
      using T = scalar_t;
      kernels::AdamScalars<T> s;
      s.decay = static_cast<T>(decoupled_ && o.weight_decay != 0 ? 1 - o.lr * o.weight_decay : 1.0);
      s.wd = static_cast<T>(o.weight_decay);
      s.sign = static_cast<T>(o.maximize ? -1.0 : 1.0);
      s.b1 = static_cast<T>(b1), s.b2 = static_cast<T>(b2);
      s.one_b1 = static_cast<T>(1 - b1), s.one_b2 = static_cast<T>(1 - b2);
      s.neg_step = static_cast<T>(-step_size), s.bc2 = static_cast<T>(bc2_sqrt), s.eps = static_cast<T>(o.eps);
      T* w = p.data<T>();
      const T* g = grad.data<T>();
      T* m = st["exp_avg"].data<T>();
      T* v = st["exp_avg_sq"].data<T>();
      T* vmax = o.amsgrad ? st["max_exp_avg_sq"].data<T>() : nullptr;
      const bool l2 = !decoupled_ && o.weight_decay != 0;
      kernels::adam_update<T>(w, g, m, v, vmax, l2, s, p.numel());
    });
  });
}

}  // namespace tapegrad::optim
