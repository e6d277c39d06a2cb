#include <tapegrad/optim/sgd.h>

#include <stdexcept>
#include <string>

#include <tapegrad/core/parallel.h>

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
      T* buf = o.momentum != 0 ? st["momentum_buffer"].data<T>() : nullptr;
      const T wd = static_cast<T>(o.weight_decay), m = static_cast<T>(o.momentum);
      const T damp = static_cast<T>(1.0 - o.dampening), neg_lr = static_cast<T>(-o.lr);
      if (!buf && o.weight_decay == 0 && !o.maximize) {  // plain SGD: w -= lr·g, a vectorised loop
        T* __restrict wr = w;
        const T* __restrict gr = g;
        parallel_for(p.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
          _Pragma("GCC unroll 4")  // four vectors an iteration: fewer loop instructions
          for (std::int64_t i = b; i < e; ++i) wr[i] = wr[i] + neg_lr * gr[i];
        });
        return;
      }
      parallel_for(p.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          T d = o.maximize ? -g[i] : g[i];
          if (o.weight_decay != 0) d = d + wd * w[i];
          if (buf) {
            buf[i] = first ? d : buf[i] * m + damp * d;
            d = o.nesterov ? d + m * buf[i] : buf[i];
          }
          w[i] = w[i] + neg_lr * d;
        }
      });
    });
  });
}

}  // namespace tapegrad::optim
