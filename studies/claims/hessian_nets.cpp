#include "hessian_nets.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/layers/functional/batch_norm.h>

namespace claims {

using namespace tapegrad;
namespace F = tapegrad::layers::functional;

HessianArm hessian_arm(const std::string& name) {
  if (name == "plain") return HessianArm::plain;
  if (name == "bn") return HessianArm::bn;
  if (name == "bn-population") return HessianArm::bn_population;
  throw std::invalid_argument("--arms: expected plain, bn or bn-population, got " + name);
}

HessianNet make_hessian_net(const std::vector<std::int64_t>& sizes, HessianArm arm, bool classify, Generator& g) {
  if (sizes.size() < 2)
    throw std::invalid_argument("make_hessian_net: expected >= 2 layer sizes, got " + std::to_string(sizes.size()));
  HessianNet n;
  n.arm = arm;
  n.classify = classify;
  n.hidden_layers = static_cast<std::int64_t>(sizes.size()) - 2;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const double b = 1 / std::sqrt(static_cast<double>(sizes[i]));
    n.params.push_back(uniform({sizes[i + 1], sizes[i]}, -b, b, Dtype::Float64, g).requires_grad_());
    n.params.push_back(uniform({sizes[i + 1]}, -b, b, Dtype::Float64, g).requires_grad_());
    if (arm != HessianArm::plain && i + 2 < sizes.size()) {
      n.params.push_back(Tensor::ones({sizes[i + 1]}, Dtype::Float64).requires_grad_());
      n.params.push_back(Tensor::zeros({sizes[i + 1]}, Dtype::Float64).requires_grad_());
      n.running_mean.push_back(Tensor::zeros({sizes[i + 1]}, Dtype::Float64));
      n.running_var.push_back(Tensor::ones({sizes[i + 1]}, Dtype::Float64));
    }
  }
  return n;
}

namespace {

enum class Stats { batch_update, batch, population, set_population };

// The MLP's output (k, out) on x; `s` says what each BN normalises with.
Tensor forward(const HessianNet& n, const Tensor& x, Stats s) {
  Tensor h = x;
  std::size_t p = 0;
  for (std::int64_t l = 0; l <= n.hidden_layers; ++l) {
    h = linear(h, n.params[p], n.params[p + 1]);
    p += 2;
    if (l == n.hidden_layers) break;
    if (n.arm != HessianArm::plain) {
      const Tensor& w = n.params[p];
      const Tensor& b = n.params[p + 1];
      p += 2;
      const Tensor& rm = n.running_mean[l];
      const Tensor& rv = n.running_var[l];
      switch (s) {
        case Stats::batch_update: h = F::batch_norm(h, rm, rv, w, b, true, 0.1, n.eps); break;
        case Stats::batch: h = F::batch_norm(h, Tensor(), Tensor(), w, b, true, 0.1, n.eps); break;
        case Stats::population: h = F::batch_norm(h, rm, rv, w, b, false, 0.1, n.eps); break;
        // momentum 1 with the biased variance: the buffers become this batch's statistics exactly
        case Stats::set_population: h = F::batch_norm(h, rm, rv, w, b, true, 1.0, n.eps, false); break;
      }
    }
    h = relu(h);
  }
  return h;
}

Tensor loss_of(const Tensor& out, const Tensor& t, bool classify) {
  if (!classify) return mean(square(sub(out, t)));
  return neg(mean(sum(mul(t, log_softmax(out, 1)), {1})));
}

}  // namespace

Tensor train_loss(HessianNet& n, const Tensor& x, const Tensor& t) {
  const Stats s = n.arm == HessianArm::bn ? Stats::batch_update : Stats::population;
  return loss_of(forward(n, x, s), t, n.classify);
}

Tensor probe_loss(const HessianNet& n, const Tensor& x, const Tensor& t, std::int64_t chunk) {
  if (n.arm != HessianArm::bn) return loss_of(forward(n, x, Stats::population), t, n.classify);
  if (chunk < 2) throw std::invalid_argument("probe_loss: expected a chunk of >= 2 rows, got " + std::to_string(chunk));
  const std::int64_t rows = x.shape()[0];
  Tensor total;
  for (std::int64_t at = 0; at < rows;) {
    std::int64_t k = std::min(chunk, rows - at);
    if (rows - at - k == 1) ++k;  // a last chunk of one row has no batch variance: it joins this one
    const Tensor l = mul(loss_of(forward(n, narrow(x, 0, at, k), Stats::batch), narrow(t, 0, at, k), n.classify),
                         static_cast<double>(k) / static_cast<double>(rows));
    total = total.defined() ? add(total, l) : l;
    at += k;
  }
  return total;
}

void refresh_population(HessianNet& n, const Tensor& x) {
  if (n.arm != HessianArm::bn_population)
    throw std::logic_error("refresh_population: only the bn-population arm has population statistics");
  NoGradGuard ng;
  ModeChecksPause deliberate;  // a train-mode forward without gradients, on purpose: it sets the statistics
  (void)forward(n, x, Stats::set_population);
}

}  // namespace claims
