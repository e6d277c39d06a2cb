#include <tapegrad/optim/sgd.h>

#include <stdexcept>
#include <string>

#include <tapegrad/optim/kernels/update.h>

namespace tapegrad::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options) { add_param_group(std::move(params), options); }

SGD::SGD(std::vector<Group> groups) {
  for (auto& g : groups) add_param_group(std::move(g.params), g.options);
}

void SGD::validate(const SGDOptions& o) const {
  if (!(o.lr >= 0)) throw std::invalid_argument("SGD: invalid learning rate " + detail::num(o.lr) + " (expected >= 0)");
  if (!(o.momentum >= 0))
    throw std::invalid_argument("SGD: invalid momentum " + detail::num(o.momentum) + " (expected >= 0)");
  if (!(o.weight_decay >= 0))
    throw std::invalid_argument("SGD: invalid weight_decay " + detail::num(o.weight_decay) + " (expected >= 0)");
  if (!(o.dampening == o.dampening)) throw std::invalid_argument("SGD: invalid dampening nan");
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw std::invalid_argument("SGD: nesterov momentum requires a momentum > 0 and zero dampening (got momentum " +
                                detail::num(o.momentum) + ", dampening " + detail::num(o.dampening) + ")");
}

void SGD::step() {
  for_each_param_with_grad([&](const Tensor& p, const Tensor& grad, ParamState& st, const SGDOptions& o) {
    const bool first = o.momentum != 0 && !st.count("momentum_buffer");
    if (first) st["momentum_buffer"] = Tensor::empty(p.shape(), p.dtype());
    TAPEGRAD_DISPATCH_FLOAT(p.dtype(), "SGD::step", [&] {
      using T = scalar_t;
      T* w = p.data<T>();
      const T* g = grad.data<T>();
      const T neg_lr = static_cast<T>(-o.lr);
      if (o.momentum == 0 && o.weight_decay == 0 && !o.maximize) {  // plain SGD: w -= lr·g
        kernels::sgd_plain<T>(w, g, neg_lr, p.numel());
        return;
      }
      kernels::SgdScalars<T> s{};
      s.wd = static_cast<T>(o.weight_decay), s.m = static_cast<T>(o.momentum);
      s.damp = static_cast<T>(1.0 - o.dampening), s.neg_lr = neg_lr;
      s.maximize = o.maximize, s.weight_decay = o.weight_decay != 0, s.first = first, s.nesterov = o.nesterov;
      kernels::sgd_update<T>(w, g, o.momentum != 0 ? st["momentum_buffer"].data<T>() : nullptr, s, p.numel());
    });
  });
}

}  // namespace tapegrad::optim
