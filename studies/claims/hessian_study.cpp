#include "hessian_study.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "kit/data.h"
#include "kit/gnuplot.h"
#include "kit/jobs.h"
#include "kit/option_checks.h"
#include "kit/training.h"
#include "kit_names.h"
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>

namespace claims {

using namespace tapegrad;

HessianOptions quick_hessian_options(HessianOptions o) {
  o.seeds = 1;
  o.steps = {0, 10};
  o.train_size = 512;
  o.fashion.hidden = {32, 16};
  o.fashion.hessian_batch = 128;
  o.chapter.hidden = {32, 16};
  o.spectrum.top_k = 5;
  o.spectrum.lanczos_steps = 20;
  o.spectrum.slq = {2, 20, 1000};
  return o;
}

void check_hessian_options(const HessianOptions& o) {
  if (o.steps.empty()) throw std::invalid_argument("--steps: expected at least one step, got none");
  for (std::size_t i = 0; i < o.steps.size(); ++i)
    if (o.steps[i] < 0 || (i > 0 && o.steps[i] <= o.steps[i - 1]))
      throw std::invalid_argument("--steps: expected increasing step counts >= 0, got " + std::to_string(o.steps[i]) +
                                  (i > 0 ? " after " + std::to_string(o.steps[i - 1]) : std::string()));
  if (o.nets.empty()) throw std::invalid_argument("--nets: expected chapter and/or fashion, got none");
  for (const auto& n : o.nets)
    if (n != "chapter" && n != "fashion") throw std::invalid_argument("--nets: expected chapter or fashion, got " + n);
  if (o.arms.empty()) throw std::invalid_argument("--arms: expected plain, bn and/or bn-population, got none");
  for (const auto& a : o.arms) (void)hessian_arm(a);
  studies::kit::check_at_least("--population-every", o.population_every, 1);
  studies::kit::check_seeds(o.seed, o.seeds);
  studies::kit::check_at_least("--top-k", o.spectrum.top_k, 1);
  // Lanczos with fewer steps than --top-k finds only that many eigenvalues (results.csv had
  // top_k = steps while the summary said top-k).
  if (o.spectrum.lanczos_steps != 0 && o.spectrum.lanczos_steps < o.spectrum.top_k)
    throw std::invalid_argument("--lanczos-steps: expected 0 (max(3·--top-k, 40)) or >= --top-k " +
                                std::to_string(o.spectrum.top_k) + ", got " + std::to_string(o.spectrum.lanczos_steps));
  studies::kit::check_at_least("--slq-probes", o.spectrum.slq.probes, 1);
  studies::kit::check_at_least("--slq-steps", o.spectrum.slq.steps, 1);
  studies::kit::check_sizes(o.train_size, 0);
  for (const auto* n : {&o.chapter, &o.fashion}) {
    if (!(n->lr > 0 && std::isfinite(n->lr)))
      throw std::invalid_argument("--lr: expected a finite rate > 0, got " + fmt9(n->lr));
    studies::kit::check_at_least("--batch", n->batch, 1);
    for (auto h : n->hidden) studies::kit::check_at_least("--hidden", h, 1);
  }
  if (o.fashion.hessian_batch < 0)  // was taken as 0, all the training images
    throw std::invalid_argument("--hessian-batch: expected 0 (all the training images) or >= 1, got " +
                                std::to_string(o.fashion.hessian_batch));
  if (o.fashion.hessian_batch > o.train_size)
    throw std::invalid_argument("--hessian-batch: " + std::to_string(o.fashion.hessian_batch) + " exceeds --train-size " +
                                std::to_string(o.train_size));
  studies::kit::check_threads(o.threads);
}

namespace {

// Rows (n, width) float64 with targets: regression values (n, 1) or class labels.
struct Rows {
  std::vector<double> x, y;
  std::int64_t n = 0, width = 0, classes = 0;  ///< classes 0: regression
};

Rows rows_of(const Tensor& X, const Tensor& y, std::int64_t classes) {
  Rows r;
  r.n = X.shape()[0];
  r.width = X.numel() / r.n;
  r.x = X.to_vector();
  r.y = y.to_vector();
  r.classes = classes;
  return r;
}

// The rows `idx` as (x, target): x (k, width); target (k, 1) values or (k, classes) one-hot.
std::pair<Tensor, Tensor> batch_of(const Rows& r, const std::vector<std::int64_t>& idx) {
  const auto k = static_cast<std::int64_t>(idx.size());
  std::vector<double> x(static_cast<std::size_t>(k * r.width));
  const std::int64_t tw = r.classes > 0 ? r.classes : 1;
  std::vector<double> t(static_cast<std::size_t>(k * tw), 0.0);
  for (std::int64_t i = 0; i < k; ++i) {
    std::copy_n(r.x.begin() + idx[i] * r.width, r.width, x.begin() + i * r.width);
    if (r.classes > 0)
      t[i * tw + static_cast<std::int64_t>(r.y[idx[i]])] = 1;
    else
      t[i] = r.y[idx[i]];
  }
  return {Tensor::from_vector(x, {k, r.width}, Dtype::Float64), Tensor::from_vector(t, {k, tw}, Dtype::Float64)};
}

std::vector<std::int64_t> first_rows(std::int64_t n) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[i] = i;
  return idx;
}

struct Job {
  const HessianNetOptions* net = nullptr;
  std::string arm;
  std::uint64_t seed = 0;
  std::vector<HessianPoint> points;
};

void one_run(Job& j, const HessianOptions& o, const Rows& train) {
  const bool classify = train.classes > 0;
  std::vector<std::int64_t> sizes = {train.width};
  sizes.insert(sizes.end(), j.net->hidden.begin(), j.net->hidden.end());
  sizes.push_back(classify ? train.classes : 1);
  // the same init seed in every arm: plain and BN nets start from the same W and b
  Generator init(studies::kit::derive_seed(j.seed, 1)), shuffle(studies::kit::derive_seed(j.seed, 2));
  HessianNet net = make_hessian_net(sizes, hessian_arm(j.arm), classify, init);
  const std::int64_t hn = j.net->hessian_batch > 0 ? std::min(j.net->hessian_batch, train.n) : train.n;
  const auto [hx, ht] = batch_of(train, first_rows(hn));
  const bool population = net.arm == HessianArm::bn_population;
  const Tensor all_x = population ? batch_of(train, first_rows(train.n)).first : Tensor();
  std::int64_t refreshed = -1;
  // bn-population: the whole training set's statistics at steps 0, k, 2k, ... (before that step)
  auto refresh = [&](std::int64_t s) {
    if (population && s % o.population_every == 0 && refreshed != s) {
      refresh_population(net, all_x);
      refreshed = s;
    }
  };
  std::vector<std::int64_t> perm(static_cast<std::size_t>(train.n));
  std::int64_t at = train.n;  // next position in perm; train.n: draw a new epoch
  const std::int64_t bs = std::min(j.net->batch, train.n);
  std::int64_t step = 0;
  for (std::int64_t target : o.steps) {
    for (; step < target; ++step) {
      if (at + bs > train.n) {
        for (std::int64_t i = 0; i < train.n; ++i) perm[i] = i;
        for (std::int64_t i = train.n - 1; i > 0; --i)
          std::swap(perm[i], perm[shuffle.next_u64() % static_cast<std::uint64_t>(i + 1)]);
        at = 0;
      }
      const auto [bx, bt] = batch_of(train, std::vector<std::int64_t>(perm.begin() + at, perm.begin() + at + bs));
      at += bs;
      refresh(step);
      const std::vector<Tensor> g = autograd::grad({train_loss(net, bx, bt)}, net.params);
      NoGradGuard ng;
      for (std::size_t k = 0; k < net.params.size(); ++k) {
        double* w = net.params[k].data<double>();
        const std::vector<double> gv = g[k].to_vector();
        for (std::size_t i = 0; i < gv.size(); ++i) w[i] -= j.net->lr * gv[i];
      }
    }
    refresh(step);
    HessianPoint pt;
    pt.net = j.net->name;
    pt.arm = j.arm;
    pt.seed = j.seed;
    pt.step = step;
    pt.params = total_numel(net.params);
    // bn: chunks of the SGD batch size, each with its own batch statistics (hessian_nets.h)
    const Tensor loss = probe_loss(net, hx, ht, bs);
    pt.loss = loss.item();
    SpectrumOptions so = o.spectrum;
    so.seed = studies::kit::derive_seed(j.seed, 3 + static_cast<std::uint64_t>(step));
    so.slq.seed = studies::kit::derive_seed(j.seed, 1u << 20) + static_cast<std::uint64_t>(step) * 1000;
    pt.probe = probe_spectrum(loss, net.params, so);
    spdlog::info("hessian {} {} seed {} step {}: loss {:.4g}, lambda_max {:.4g}, edge {:.4g}, {} outliers, share {:.3f}",
                 pt.net, pt.arm, pt.seed, pt.step, pt.loss, pt.probe.lambda_max, pt.probe.bulk_edge, pt.probe.outliers,
                 pt.probe.gradient_share);
    j.points.push_back(std::move(pt));
  }
}

}  // namespace

HessianResult run_hessian(const HessianOptions& o, const studies::kit::StudyData& d) {
  HessianResult r;
  r.options = o;
  Rows chapter, fashion;
  const studies::kit::RegressionData c = studies::kit::make_regression_data(0);
  chapter = rows_of(c.x_train, c.y_train, 0);
  if (std::find(o.nets.begin(), o.nets.end(), "fashion") != o.nets.end()) fashion = rows_of(d.train.X, d.train.y, 10);
  std::vector<Job> jobs;
  for (const auto& n : o.nets)
    for (const auto& a : o.arms)
      for (int s = 0; s < o.seeds; ++s) jobs.push_back({n == "chapter" ? &o.chapter : &o.fashion, a, o.seed + s, {}});
  r.seconds = studies::kit::run_grid(jobs, o.threads,
                                     [&](Job& j) { one_run(j, o, j.net->name == "chapter" ? chapter : fashion); });
  for (auto& j : jobs)
    for (auto& p : j.points) r.points.push_back(std::move(p));
  return r;
}

std::string hessian_csv(const HessianResult& r) {
  std::ostringstream s;
  s << "net,arm,seed,step,params,loss,lambda_max,lambda_min,sigma,bulk_edge,outliers,top_k,gradient_share,gradient_norm";
  for (int i = 0; i < r.options.spectrum.top_k; ++i) s << ",lambda_" << i + 1;
  s << "\n";
  for (const auto& p : r.points) {
    s << p.net << "," << p.arm << "," << p.seed << "," << p.step << "," << p.params << "," << fmt9(p.loss) << ","
      << fmt9(p.probe.lambda_max) << "," << fmt9(p.probe.lambda_min) << "," << fmt9(p.probe.sigma) << ","
      << fmt9(p.probe.bulk_edge) << "," << p.probe.outliers << "," << p.probe.top.size() << ","
      << fmt9(p.probe.gradient_share) << "," << fmt9(p.probe.gradient_norm);
    for (int i = 0; i < r.options.spectrum.top_k; ++i)
      s << "," << (i < static_cast<int>(p.probe.top.size()) ? fmt9(p.probe.top[i]) : std::string());
    s << "\n";
  }
  return s.str();
}

std::vector<std::string> write_hessian(const HessianResult& r, const std::string& dir) {
  const HessianOptions& o = r.options;
  // density.csv: the smoothed SLQ density of every probe on 400 points over its own range
  std::ostringstream dens;
  dens << "net,arm,seed,step,t,phi\n";
  struct Curve {
    std::string net, arm;
    std::int64_t step;
    std::string dat;
  };
  std::vector<Curve> curves;
  for (const auto& p : r.points) {
    const double lo = p.probe.lambda_min - 5 * p.probe.sigma, hi = std::max(p.probe.lambda_max, lo) + 5 * p.probe.sigma;
    const DensityGrid g = density_grid(p.probe.density, lo, hi, 400, p.probe.sigma);
    std::ostringstream dat;
    for (std::size_t i = 0; i < g.t.size(); ++i) {
      dens << p.net << "," << p.arm << "," << p.seed << "," << p.step << "," << fmt9(g.t[i]) << "," << fmt9(g.phi[i]) << "\n";
      dat << fmt9(g.t[i]) << " " << fmt9(std::max(g.phi[i], 1e-12)) << "\n";
    }
    if (p.seed == o.seed) curves.push_back({p.net, p.arm, p.step, dat.str()});
  }
  if (!studies::kit::write_tables(dir, hessian_csv(r), hessian_summary(r))) {
    studies::kit::write_file(dir + "/density.csv", dens.str());
    return {};
  }
  studies::kit::write_file(dir + "/density.csv", dens.str());
  using studies::kit::gnuplot_text;
  std::vector<std::string> pngs;
  for (const auto& net : o.nets)
    for (const auto& arm : o.arms) {
      const std::string name = "hessian_density_" + net + "_" + arm;
      std::ostringstream gp;
      gp << "set terminal pngcairo size 900,520 font 'sans,10'\nset output '" << name << ".png'\n"
         << "set title " << gnuplot_text(net + " MLP, " + arm + ", seed " + std::to_string(o.seed) +
                                         ": SLQ density of the loss Hessian by training step")
         << "\nset xlabel 'eigenvalue'\nset ylabel 'density'\nset logscale y\nset format y '10^{%L}'\nset yrange [1e-8:*]\nset grid\nset key top right\nplot ";
      bool first = true;
      for (const auto& c : curves) {
        if (c.net != net || c.arm != arm) continue;
        const std::string f =
            studies::kit::data_file(dir, "density_" + net + "_" + arm + "_" + std::to_string(c.step) + ".dat", c.dat);
        gp << (first ? "" : ", ") << f << " using 1:2 with lines lw 2 title " << gnuplot_text("step " + std::to_string(c.step));
        first = false;
      }
      gp << "\n";
      for (auto& p : studies::kit::render_figure(dir, name, gp.str())) pngs.push_back(p);
    }
  return pngs;
}

}  // namespace claims
