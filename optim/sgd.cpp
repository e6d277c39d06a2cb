#include "optim/sgd.h"

#include <stdexcept>
#include <string>

#include "core/autograd.h"
#include "layers/hooks.h"

namespace tapegrad::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions opts) : options(opts), params_(std::move(params)) {
  if (!(opts.lr >= 0)) throw std::invalid_argument("SGD: invalid learning rate " + std::to_string(opts.lr));
  if (!(opts.momentum >= 0)) throw std::invalid_argument("SGD: invalid momentum " + std::to_string(opts.momentum));
  if (!(opts.weight_decay >= 0))
    throw std::invalid_argument("SGD: invalid weight_decay " + std::to_string(opts.weight_decay));
  if (opts.nesterov && (opts.momentum <= 0 || opts.dampening != 0))
    throw std::invalid_argument("SGD: nesterov momentum requires a momentum and zero dampening");
  momentum_buffers_.resize(params_.size());
}

void SGD::step() {
  layers::hooks::run_step_hooks(params_);
  NoGradGuard ng;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor d = g;
    if (options.weight_decay != 0) d = g.clone().add_(p, options.weight_decay);
    if (options.momentum != 0) {
      Tensor& buf = momentum_buffers_[i];
      if (!buf.defined()) {
        buf = d.clone();
      } else {
        buf.mul_(options.momentum).add_(d, 1.0 - options.dampening);
      }
      if (options.nesterov)
        d = d.clone().add_(buf, options.momentum);
      else
        d = buf;
    }
    Tensor(p).add_(d, -options.lr);
  }
}

void SGD::zero_grad(bool set_to_none) {
  for (auto& p : params_) p.zero_grad(set_to_none);
}

}  // namespace tapegrad::optim
