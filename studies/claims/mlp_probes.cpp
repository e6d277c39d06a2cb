#include "mlp_probes.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include <tapegrad/core/autograd.h>
#include <tapegrad/debug/buffers.h>
#include <tapegrad/layers/losses.h>
#include "kit/option_checks.h"
#include "kit/training_options.h"

namespace claims {

using namespace tapegrad;
using studies::kit::fmt4;
using studies::kit::fmt9;

MlpProbeOptions quick_mlp_probe_options(MlpProbeOptions o) {
  o = studies::kit::with_quick_size(o, {.seeds = 2, .epochs = 1, .train_size = 1024, .test_size = 1000});
  o.every = 4;
  o.grid = 5;
  return o;
}

void check_mlp_probe_options(const MlpProbeOptions& o) {
  studies::kit::check_training_options(o);
  studies::kit::check_at_least("--every", o.every, 1);
  studies::kit::check_at_least("--grid", o.grid, 2);
  if (!(o.eta_min > 0 && o.eta_max > o.eta_min && std::isfinite(o.eta_max)))
    throw std::invalid_argument("--eta-min/--eta-max: expected 0 < min < max, got " + fmt9(o.eta_min) + " " + fmt9(o.eta_max));
}

namespace {

using Grads = std::vector<std::vector<double>>;

struct Probe {
  Mlp& m;
  std::vector<Tensor> params;       // groups flattened
  std::vector<std::size_t> start;   // flat index of group i's first tensor (Linear i's weight)
  double loss_grads(const Tensor& X, const Tensor& y, Grads& g) {
    for (auto& p : params) p.zero_grad();
    Tensor L = layers::cross_entropy((*m.net)(X), y);
    L.backward();
    g.resize(params.size());
    for (std::size_t k = 0; k < params.size(); ++k) g[k] = params[k].grad().to_vector();
    for (auto& p : params) p.zero_grad();
    return L.item();
  }
  void step(const Grads& g, std::size_t upto, double eta) {
    NoGradGuard ng;
    for (std::size_t k = 0; k < upto; ++k)
      params[k].add_(Tensor::from_vector(g[k], params[k].shape(), params[k].dtype()), -eta);
  }
  std::vector<Tensor> save() {
    NoGradGuard ng;
    std::vector<Tensor> out;
    for (const auto& p : params) out.push_back(p.clone());
    return out;
  }
  void load(const std::vector<Tensor>& saved) {
    NoGradGuard ng;
    for (std::size_t k = 0; k < params.size(); ++k) Tensor(params[k]).copy_(saved[k]);
  }
};


LinearRun train_one(const MlpProbeOptions& o, const studies::kit::StudyData& d, bool bn, std::uint64_t seed, bool ics,
                    bool landscape) {
  LinearRun run;
  run.bn = bn;
  run.seed = seed;
  MlpSpec spec;
  spec.hidden = o.hidden;
  spec.bn = bn;
  Generator init(seed);
  Mlp m = build_mlp(spec, d.train.num_features(), 10, init);
  Probe pr{m, {}, {}};
  for (const auto& g : m.groups) {
    pr.start.push_back(pr.params.size());
    for (const auto& t : g) pr.params.push_back(t);
  }
  const TrainSpec t{.epochs = o.epochs, .batch = o.batch, .lr = o.lr, .momentum = 0, .shuffle_seed = seed + 1000003};
  const std::int64_t total = o.epochs * (o.train_size / o.batch);
  Grads G, Gp;
  auto probe = [&](std::int64_t step, const Tensor& X, const Tensor& y) {
    if (step % o.every != 0 && step != total - 1) return;
    const auto saved_b = debug::snapshot_buffers(*m.net);
    const auto saved_p = pr.save();
    const double L = pr.loss_grads(X, y, G);
    debug::restore_buffers(*m.net, saved_b);
    const int st = static_cast<int>(step);
    run.loss.emplace_back(st, L);
    if (ics) {
      IcsPoint pt;
      pt.step = st;
      for (std::size_t i = 1; i < m.groups.size(); ++i) {
        pr.step(G, pr.start[i], o.lr);
        pr.loss_grads(X, y, Gp);
        pt.add_layer(G[pr.start[i]], Gp[pr.start[i]]);
        pr.load(saved_p);
        debug::restore_buffers(*m.net, saved_b);
      }
      run.ics.push_back(pt);
    }
    if (landscape) {
      LandscapePoint pt;
      pt.step = st;
      pt.loss = L;
      pt.begin(grad_norm(G));
      for (int k = 0; k < o.grid; ++k) {
        const double eta = o.lr * o.eta_min * std::pow(o.eta_max / o.eta_min, static_cast<double>(k) / (o.grid - 1));
        pr.step(G, pr.params.size(), eta);
        const double le = pr.loss_grads(X, y, Gp);
        pt.add(eta, le, grad_dist(G, Gp));
        pr.load(saved_p);
        debug::restore_buffers(*m.net, saved_b);
      }
      run.landscape.push_back(pt);
    }
  };
  const TrainOutcome out = train_mlp(m, t, d, probe);
  run.crashed = out.crashed;
  run.crash_step = static_cast<int>(out.crash_step);
  spdlog::info("mlp probes {} seed {}: last-epoch loss {:.4g}, test {:.4g}%", bn ? "bn" : "plain", seed,
               out.last_epoch_loss, 100 * out.test_acc);
  return run;
}

}  // namespace

LinearResult run_mlp_probes(const MlpProbeOptions& o, const studies::kit::StudyData& d, bool ics, bool landscape) {
  check_mlp_probe_options(o);
  LinearResult r;
  r.options.depth = static_cast<int>(o.hidden.size()) + 1;
  r.options.steps = static_cast<int>(o.epochs * (o.train_size / o.batch));
  r.options.every = o.every;
  r.options.grid = o.grid;
  r.options.eta_min = o.eta_min;
  r.options.eta_max = o.eta_max;
  r.options.lr = o.lr;
  static_cast<studies::kit::SeedOptions&>(r.options) = o;  // the seeds and workers
  r.ics = ics;
  r.landscape = landscape;
  std::ostringstream desc;
  desc << "Fashion-MNIST MLP " << studies::kit::mlp_layers(o.hidden)
     << ", bn: Linear -> BatchNorm1d -> ReLU, plain: Linear -> ReLU; " << o.train_size
       << " training images, plain SGD (no momentum) lr " << fmt4(o.lr) << ", batch " << o.batch << ", " << o.epochs
       << " epochs (" << r.options.steps << " steps), float32; probes on the minibatch about to be trained on";
  if (landscape) desc << "; landscape η ∈ [" << fmt4(o.eta_min) << ", " << fmt4(o.eta_max) << "]× lr";
  desc << "; loss = mean cross-entropy of that minibatch";
  r.description = desc.str();
  r.figure_name = "Fashion-MNIST MLP";
  for (bool bn : {false, true}) {
    LinearRun cell;
    cell.bn = bn;
    studies::kit::add_seed_runs(r.runs, cell, o);
  }
  r.seconds = studies::kit::run_grid(r.runs, o.threads,
                                     [&](LinearRun& run) { run = train_one(o, d, run.bn, run.seed, ics, landscape); });
  return r;
}

}  // namespace claims
