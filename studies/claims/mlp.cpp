#include "mlp.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/layers/activation.h>

namespace claims {

using namespace tapegrad;

namespace {

Mlp build_unchecked(const MlpSpec& s, std::int64_t in_features, std::int64_t classes, Generator& init) {
  if (!(s.weight_scale >= 0 && std::isfinite(s.weight_scale)))
    throw std::invalid_argument("weight scale: expected a finite number >= 0, got " + std::to_string(s.weight_scale));
  Mlp m;
  m.net = std::make_shared<layers::Sequential>();
  std::int64_t in = in_features;
  auto linear = [&](std::int64_t out) {
    auto l = std::make_shared<layers::Linear>(in, out, true, Dtype::Float32, init);
    if (s.weight_scale > 0) {
      NoGradGuard ng;
      const double std = s.weight_scale * std::sqrt(2.0 / static_cast<double>(in));
      l->weight.copy_(randn(l->weight.shape(), Dtype::Float32, init) * std);
      l->bias.zero_();
    }
    m.net->push_back(l);
    m.linears.push_back(l);
    m.groups.push_back({l->weight, l->bias});
    in = out;
  };
  for (std::size_t k = 0; k < s.hidden.size(); ++k) {
    linear(s.hidden[k]);
    if (s.bn) {
      auto b = std::make_shared<layers::BatchNorm1d>(s.hidden[k]);
      m.net->push_back(b);
      m.bns.push_back(b);
      m.groups.back().push_back(b->weight);
      m.groups.back().push_back(b->bias);
    }
    if (s.noise) {
      auto z = std::make_shared<DistributionNoise>(*s.noise, s.noise_seed + k);
      m.net->push_back(z);
      m.noises.push_back(z);
    }
    m.net->push_back(std::make_shared<layers::ReLU>());
  }
  linear(classes);
  m.net->train();
  return m;
}

}  // namespace

Mlp build_mlp(const MlpSpec& s, std::int64_t in_features, std::int64_t classes, Generator& init) {
  const std::string option = s.hidden_option.empty() ? "--hidden " + studies::kit::join_widths(s.hidden) : s.hidden_option;
  studies::kit::check_widths(option, s.hidden);
  return studies::kit::name_out_of_memory(option,
                                     [&] { return build_unchecked(s, in_features, classes, init); });
}

}  // namespace claims

#include <tapegrad/data/dataloader.h>
#include <tapegrad/optim/sgd.h>
#include "kit/option_checks.h"
#include "kit/train_epochs.h"

namespace claims {

TrainOutcome train_mlp(Mlp& m, const TrainSpec& t, const studies::kit::StudyData& d,
                       const std::function<void(std::int64_t, const Tensor&, const Tensor&)>& before_step) {
  TrainOutcome out;
  optim::SGD opt(m.net->parameters(), {.lr = t.lr, .momentum = t.momentum});
  Generator shuffle(t.shuffle_seed);
  data::DataLoader loader = studies::kit::shuffled_batches(d.train, t.batch, shuffle);
  auto crash = [&](std::int64_t step, double L) {
    if (step == 1) out.first_loss = L;
    if (!studies::kit::crashed_loss(L)) return false;
    out.crashed = true;
    out.crash_step = step;
    return true;
  };
  out.last_epoch_loss = studies::kit::train_epochs(*m.net, opt, loader, t.epochs, crash, before_step);
  out.train_acc = out.crashed ? NAN : studies::kit::evaluate_eval_mode(*m.net, d.train).accuracy;
  out.test_acc = out.crashed ? NAN : studies::kit::evaluate_eval_mode(*m.net, d.test).accuracy;
  return out;
}

}  // namespace claims
