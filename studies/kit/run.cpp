#include "kit/run.h"

#include "kit/sgd_epoch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/debug/buffers.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/train/evaluate_batches.h>
#include <tapegrad/optim/sgd.h>

namespace studies::kit {

using tapegrad::Tensor;

std::string policy_name(EvalPolicy p) { return p == EvalPolicy::Eval ? "eval" : "train"; }

EvalPolicy parse_policy(const std::string& s) {
  if (s == "eval") return EvalPolicy::Eval;
  if (s == "train") return EvalPolicy::Train;
  throw std::invalid_argument("unknown evaluation policy '" + s + "': expected eval or train");
}

bool is_crash_loss(double loss) { return !std::isfinite(loss) || loss > kCrashLoss; }

std::string RunConfig::key() const {
  std::ostringstream os;
  os.precision(17);
  for (auto s : sizes) os << s << '-';
  os << '|' << tapegrad::models::norm_name(norm) << '|' << lr << '|' << epochs << '|' << batch << '|' << bn_momentum
     << '|' << (grad_clip ? *grad_clip : -1.0) << '|' << (act_clip ? *act_clip : -1.0) << '|' << seed << '|';
  for (auto p : policies) os << policy_name(p);
  return os.str();
}

tapegrad::models::MLPOptions mlp_options(const RunConfig& cfg) {
  tapegrad::models::MLPOptions mo;
  mo.norm = cfg.norm;
  mo.bn_momentum = cfg.bn_momentum;
  mo.act_clip = cfg.act_clip;
  return mo;
}

double evaluate(tapegrad::models::MLP& model, const Tensor& x, const Tensor& y, EvalPolicy policy) {
  tapegrad::train::BatchEvalOptions o;  // the whole set as one batch
  o.train_mode = policy == EvalPolicy::Train;
  double loss = 0;
  tapegrad::train::evaluate_batches(model, x, o, [&](std::int64_t, std::int64_t, std::int64_t, const Tensor& out) {
    loss = tapegrad::layers::mse_loss(out, y).item();
  });
  return loss;
}

namespace {

bool has_running_stats(tapegrad::models::MLP& model) { return !model.buffers().empty(); }

}  // namespace

RunResult train_run(const RunConfig& cfg, const Dataset& data) {
  const std::int64_t n = data.x_train.size(0), f = data.x_train.size(1);
  if (cfg.batch < 1 || cfg.batch > n)
    throw std::invalid_argument("train_run: batch must be in [1, " + std::to_string(n) + "], got " +
                                std::to_string(cfg.batch));
  if (cfg.epochs < 0) throw std::invalid_argument("train_run: epochs must be >= 0, got " + std::to_string(cfg.epochs));
  if (cfg.policies.empty()) throw std::invalid_argument("train_run: no evaluation policy given");
  if (cfg.sizes.empty() || cfg.sizes.front() != f)
    throw std::invalid_argument("train_run: the net's input size must be the data's " + std::to_string(f) +
                                " features, got " + (cfg.sizes.empty() ? std::string("no sizes")
                                                                       : std::to_string(cfg.sizes.front())));
  const auto t0 = std::chrono::steady_clock::now();

  tapegrad::Generator init_gen(derive_seed(cfg.seed, 1)), shuffle_gen(derive_seed(cfg.seed, 2));
  auto model = std::make_shared<tapegrad::models::MLP>(cfg.sizes, mlp_options(cfg), init_gen);
  tapegrad::layers::fuse_modules(*model);  // BatchNorm1d -> ReLU -> Clamp as one op each: the same bits, faster
  model->train();
  tapegrad::optim::SGD sgd(model->parameters(), {.lr = cfg.lr});

  RunResult r;
  r.model = model;
  r.loss.resize(cfg.policies.size());
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  const bool stats = has_running_stats(*model);
  EpochOptions eo;
  eo.batch = cfg.batch;
  eo.grad_clip = cfg.grad_clip;
  eo.stop_on_crash = true;

  auto record_crash = [&](int epoch, const std::string& why) {
    r.crashed = true;
    r.crash_epoch = epoch;
    r.crash_reason = why + " at epoch " + std::to_string(epoch);
  };

  for (int epoch = 1; epoch <= cfg.epochs && !r.crashed; ++epoch) {
    // the run's own generator: every net of a seed sees the same order
    shuffle_order(perm, shuffle_gen);
    const EpochStats es = sgd_epoch(*model, sgd, data.x_train, data.y_train, perm, eo);
    r.steps += es.steps;
    if (es.crashed) {
      std::ostringstream os;
      os << "minibatch loss " << es.crash_loss << " at step " << es.crash_step;
      record_crash(epoch, os.str());
    }
    // Evaluate every policy on both splits. Without running statistics the policies agree,
    // so the net is evaluated once.
    tapegrad::layers::StateDict saved;
    for (std::size_t p = 0; p < cfg.policies.size(); ++p) {
      const EvalPolicy pol = cfg.policies[p];
      if (p > 0 && !stats) {
        r.loss[p][0].push_back(r.loss[0][0].back());
        r.loss[p][1].push_back(r.loss[0][1].back());
        continue;
      }
      // A train-mode evaluation followed by another policy must not leak its running
      // statistics into the next one: keep a copy and restore it.
      const bool restore = stats && pol == EvalPolicy::Train && cfg.policies.size() > 1;
      if (restore) saved = tapegrad::debug::snapshot_buffers(*model);
      r.loss[p][0].push_back(evaluate(*model, data.x_train, data.y_train, pol));
      r.loss[p][1].push_back(evaluate(*model, data.x_test, data.y_test, pol));
      if (restore) tapegrad::debug::restore_buffers(*model, saved);
    }
    if (!r.crashed) {
      for (std::size_t p = 0; p < cfg.policies.size() && !r.crashed; ++p)
        for (int s = 0; s < 2 && !r.crashed; ++s)
          if (is_crash_loss(r.loss[p][s].back())) {
            std::ostringstream os;
            os << (s == 0 ? "train" : "test") << " loss " << r.loss[p][s].back() << " (" << policy_name(cfg.policies[p])
               << " policy)";
            record_crash(epoch, os.str());
          }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace studies::kit
