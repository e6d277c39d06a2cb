#include <tapegrad/optim/rmsprop.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/counter.h>
#include <tapegrad/core/parallel.h>

namespace tapegrad::optim {

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options) { add_param_group(std::move(params), options); }
RMSprop::RMSprop(std::vector<Group> groups) {
  for (auto& g : groups) add_param_group(std::move(g.params), g.options);
}

void RMSprop::validate(const RMSpropOptions& o) const {
  auto check = [](double v, const char* what) {
    if (!(v >= 0))
      throw std::invalid_argument(std::string("RMSprop: invalid ") + what + " " + detail::num(v) + " (expected >= 0)");
  };
  check(o.lr, "learning rate");
  check(o.eps, "epsilon");
  check(o.momentum, "momentum");
  check(o.weight_decay, "weight_decay");
  check(o.alpha, "alpha");
}

void RMSprop::step() {
  for_each_param_with_grad([&](const Tensor& p, const Tensor& grad, ParamState& st, const RMSpropOptions& o) {
    if (!st.count("step")) {
      st["step"] = Tensor::from_int64({0}, {});
      st["square_avg"] = Tensor::zeros(p.shape(), p.dtype());
    }
    if (o.momentum > 0 && !st.count("momentum_buffer")) st["momentum_buffer"] = Tensor::zeros(p.shape(), p.dtype());
    if (o.centered && !st.count("grad_avg")) st["grad_avg"] = Tensor::zeros(p.shape(), p.dtype());
    saturating_increment(st["step"].data<std::int64_t>()[0]);
    TAPEGRAD_DISPATCH_FLOAT(p.dtype(), "RMSprop::step", [&] {
      using T = scalar_t;
      T* w = p.data<T>();
      const T* g = grad.data<T>();
      T* s = st["square_avg"].data<T>();
      T* a = o.centered ? st["grad_avg"].data<T>() : nullptr;
      T* buf = o.momentum > 0 ? st["momentum_buffer"].data<T>() : nullptr;
      const T alpha = static_cast<T>(o.alpha), one_alpha = static_cast<T>(1 - o.alpha);
      const T wd = static_cast<T>(o.weight_decay), eps = static_cast<T>(o.eps);
      const T mom = static_cast<T>(o.momentum), neg_lr = static_cast<T>(-o.lr);
      parallel_for(p.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          T gi = o.maximize ? -g[i] : g[i];
          if (o.weight_decay != 0) gi = gi + wd * w[i];
          s[i] = s[i] * alpha + one_alpha * gi * gi;
          T avg;
          if (a) {
            a[i] = a[i] * alpha + one_alpha * gi;
            avg = std::sqrt(s[i] + T(-1) * a[i] * a[i]) + eps;
          } else {
            avg = std::sqrt(s[i]) + eps;
          }
          if (buf) {
            buf[i] = buf[i] * mom + gi / avg;
            w[i] = w[i] + neg_lr * buf[i];
          } else {
            w[i] = w[i] + neg_lr * gi / avg;
          }
        }
      });
    });
  });
}

}  // namespace tapegrad::optim
