#include "kit/training.h"

#include "kit/data.h"
#include "kit/sgd_epoch.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/debug/mode_audit.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/train/evaluate_batches.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/sgd.h>

namespace studies::kit {

using namespace tapegrad;
using namespace tapegrad::debug;

namespace {

Tensor affine_rows(const Tensor& x, const std::vector<double>& a, const std::vector<double>& b) {
  auto v = x.to_vector();
  const std::int64_t D = x.size(1);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = a[i % D] * v[i] + b[i % D];
  return Tensor::from_vector(v, x.shape(), x.dtype());
}

Tensor targets(const Tensor& x, const Tensor& noise) {
  const auto vx = x.to_vector(), vn = noise.to_vector();
  const std::int64_t n = x.size(0), D = x.size(1);
  std::vector<double> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) y[i] = chapter_target(vx[i * D], vx[i * D + 1], vn[i]);
  return Tensor::from_vector(y, {n, 1}, Dtype::Float32);
}

void set_bn_mode(layers::Module& net, bool training) {
  for (auto& [p, m] : net.named_modules())
    if (dynamic_cast<layers::BatchNormBase*>(m)) m->train(training);
}

}  // namespace

RegressionData make_regression_data(std::uint64_t seed, std::int64_t n_train, std::int64_t n_test,
                                    std::int64_t features) {
  if (features < 2) throw std::invalid_argument("make_regression_data: need >= 2 features, got " +
                                                std::to_string(features));
  Generator g(seed);
  RegressionData d;
  d.x_train = randn({n_train, features}, Dtype::Float32, g);
  d.y_train = targets(d.x_train, randn({n_train}, Dtype::Float32, g));
  d.x_test = randn({n_test, features}, Dtype::Float32, g);
  d.y_test = targets(d.x_test, randn({n_test}, Dtype::Float32, g));
  return d;
}

RegressionData make_shifted_data(std::uint64_t seed) {
  RegressionData d = make_regression_data(seed);
  Generator g(seed + 1000);
  const std::int64_t D = d.x_train.size(1);
  std::vector<double> a(D), b(D);
  for (std::int64_t j = 0; j < D; ++j) {
    a[j] = 0.5 + 1.5 * g.uniform();
    b[j] = -1.0 + 2.0 * g.uniform();
  }
  d.x_train = affine_rows(d.x_train, a, b);
  d.x_test = affine_rows(d.x_test, a, b);
  return d;
}

std::shared_ptr<layers::Sequential> make_net(const NetOptions& o) {
  Generator gen(o.seed);
  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  mo.bn_momentum = o.momentum;
  mo.bn_unbiased_running_var = !o.biased_running_var;
  return std::make_shared<models::MLP>(o.sizes, mo, gen);
}

std::vector<std::string> batch_norm_paths(layers::Module& net) {
  std::vector<std::string> out;
  for (auto& [p, m] : net.named_modules())
    if (dynamic_cast<layers::BatchNormBase*>(m)) out.push_back(p);
  return out;
}

double eval_mse(layers::Module& net, const Tensor& x, const Tensor& y) {
  AuditPause pause;
  double loss = 0;
  train::evaluate_batches(net, x, {}, [&](std::int64_t, std::int64_t, std::int64_t, const Tensor& out) {
    loss = layers::mse_loss(out, y).item();
  });
  return loss;
}

TrainLog train_regression(layers::Module& net, const RegressionData& d, const TrainConfig& c) {
  if (c.batch < 1) throw std::invalid_argument("train_regression: batch must be >= 1, got " + std::to_string(c.batch));
  optim::SGDOptions so;
  so.lr = c.lr;
  optim::SGD sgd(net.parameters(), so);
  Generator gen(c.shuffle_seed);
  std::vector<std::int64_t> order(static_cast<std::size_t>(d.x_train.size(0)));
  EpochOptions eo;
  eo.batch = c.batch;
  eo.drop_last = false;
  eo.min_batch = 2;  // BatchNorm refuses a training batch of one
  TrainLog log;
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    if (c.freeze_bn) set_bn_mode(net, false);
    shuffle_order(order, gen);
    const EpochStats es = sgd_epoch(net, sgd, d.x_train, d.y_train, order, eo);
    const double total = es.loss_sum;
    const int batches = es.steps;
    log.train_loss.push_back(batches ? total / batches : 0.0);
    if (c.validation != Validation::None) {
      if (c.validation != Validation::TrainModeNoGrad) net.eval();
      {
        NoGradGuard ng;
        std::optional<tapegrad::ModeChecksPause> repro;  // the reproduction of the train-mode validation
        if (c.validation == Validation::TrainModeNoGrad) repro.emplace();
        log.val_loss.push_back(layers::mse_loss(net(d.x_test), d.y_test).item());
      }
      if (c.validation == Validation::Correct) net.train();
    }
    log.eval_loss.push_back(eval_mse(net, d.x_test, d.y_test));
  }
  return log;
}

}  // namespace studies::kit
