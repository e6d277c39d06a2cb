#include "deep_linear.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/gnuplot.h"
#include "kit/stats.h"
#include "kit_names.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/init.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>

namespace claims {

using namespace tapegrad;

void IcsPoint::add_layer(const std::vector<double>& g, const std::vector<double>& gp) {
  const double d = dist(g, gp), ng = std::sqrt(dot(g, g)), ngp = std::sqrt(dot(gp, gp));
  l2.push_back(d);
  rel.push_back(ng > 0 ? d / ng : 0.0);
  cos.push_back(ng > 0 && ngp > 0 ? dot(g, gp) / (ng * ngp) : 1.0);
}

void LandscapePoint::begin(double g_norm) {
  grad_norm = g_norm;
  loss_min = gpred_min = INFINITY;
  loss_max = gpred_max = -INFINITY;
}

void LandscapePoint::add(double eta, double loss_eta, double grad_dist) {
  loss_min = std::min(loss_min, loss_eta);
  loss_max = std::max(loss_max, loss_eta);
  gpred_min = std::min(gpred_min, grad_dist);
  gpred_max = std::max(gpred_max, grad_dist);
  if (grad_norm > 0) beta = std::max(beta, grad_dist / (eta * grad_norm));
}

LinearOptions quick_linear_options(LinearOptions o) {
  o.steps = 200;
  o.every = 50;
  o.grid = 5;
  o.seeds = 2;
  return o;
}

void check_linear_options(const LinearOptions& o) {
  if (o.depth < 2 || o.depth > 10000)  // each layer is a width x width weight and its probes
    throw std::invalid_argument("--depth: expected 2 to 10000 layers, got " + std::to_string(o.depth));
  studies::kit::check_at_least("--width", o.width, 1);
  if (o.samples < 2) throw std::invalid_argument("--samples must be >= 2 (BatchNorm needs 2), got " + std::to_string(o.samples));
  studies::kit::check_rate("--lr", o.lr);
  studies::kit::check_at_least("--steps", o.steps, 1);
  studies::kit::check_at_least("--every", o.every, 1);
  studies::kit::check_at_least("--grid", o.grid, 2);
  if (!(o.eta_min > 0 && o.eta_max > o.eta_min && std::isfinite(o.eta_max)))
    throw std::invalid_argument("--eta-range: expected 0 < min < max, got " + fmt9(o.eta_min) + " " + fmt9(o.eta_max));
  studies::kit::check_seeds(o.seed, o.seeds);
  if (!(o.init_scale > 0 && std::isfinite(o.init_scale)))
    throw std::invalid_argument("--scales: expected finite scales > 0, got " + fmt9(o.init_scale));
  studies::kit::check_threads(o.threads);
}

namespace {

struct Net {
  std::shared_ptr<layers::Sequential> seq;
  std::vector<std::shared_ptr<layers::Linear>> lin;
  std::vector<std::vector<Tensor>> groups;  ///< groups[j]: Linear j's weight, then its BN's γ and β
  std::vector<Tensor> params;              ///< every parameter, group order
  std::vector<Tensor> buffers;             ///< BN running statistics
  std::vector<std::shared_ptr<DistributionNoise>> noises;
};

Net build(const LinearOptions& o, bool bn, Generator& init, const NoiseOptions* noise = nullptr,
          std::uint64_t noise_seed = 0) {
  Net n;
  n.seq = std::make_shared<layers::Sequential>();
  const double bound = o.init_scale * std::sqrt(6.0 / static_cast<double>(2 * o.width));  // Glorot uniform × scale
  layers::BatchNormOptions bo;
  bo.dtype = Dtype::Float64;
  for (int j = 0; j < o.depth; ++j) {
    auto l = std::make_shared<layers::Linear>(o.width, o.width, false, Dtype::Float64, init);
    layers::init::uniform_(l->weight, -bound, bound, init);
    n.seq->push_back(l);
    n.lin.push_back(l);
    std::vector<Tensor> g{l->weight};
    if (bn && j + 1 < o.depth) {
      auto b = std::make_shared<layers::BatchNorm1d>(o.width, bo);
      n.seq->push_back(b);
      g.push_back(b->weight);
      g.push_back(b->bias);
      n.buffers.push_back(b->running_mean);
      n.buffers.push_back(b->running_var);
      n.buffers.push_back(b->num_batches_tracked);
    }
    if (noise && j + 1 < o.depth) {
      auto z = std::make_shared<DistributionNoise>(*noise, noise_seed + static_cast<std::uint64_t>(j));
      n.seq->push_back(z);
      n.noises.push_back(z);
    }
    for (auto& t : g) n.params.push_back(t);
    n.groups.push_back(std::move(g));
  }
  n.seq->train();
  return n;
}

// Loss and every parameter's gradient (flat, in n.params order) at the current weights.
double loss_grads(Net& n, const Tensor& X, const Tensor& Y, std::vector<std::vector<double>>& grads) {
  for (auto& p : n.params) p.zero_grad();
  Tensor L = layers::mse_loss((*n.seq)(X), Y, layers::Reduction::Sum);
  L.backward();
  grads.resize(n.params.size());
  for (std::size_t k = 0; k < n.params.size(); ++k) grads[k] = n.params[k].grad().to_vector();
  return L.item();
}

// Adds -eta·grads to the parameters [0, upto) (flat index).
void step_params(Net& n, const std::vector<std::vector<double>>& grads, std::size_t upto, double eta) {
  NoGradGuard ng;
  for (std::size_t k = 0; k < upto; ++k)
    n.params[k].add_(Tensor::from_vector(grads[k], n.params[k].shape(), Dtype::Float64), -eta);
}

// Copies of tensors and their restoration, outside the tape.
std::vector<Tensor> save(const std::vector<Tensor>& ts) {
  NoGradGuard ng;
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.clone());
  return out;
}
void load(const std::vector<Tensor>& ts, const std::vector<Tensor>& saved) {
  NoGradGuard ng;
  for (std::size_t i = 0; i < ts.size(); ++i) Tensor(ts[i]).copy_(saved[i]);
}

IcsPoint probe_ics(Net& n, const Tensor& X, const Tensor& Y, const std::vector<std::vector<double>>& G, double lr) {
  IcsPoint pt;
  const auto saved_p = save(n.params), saved_b = save(n.buffers);
  std::size_t before = n.groups[0].size();  // flat index of Linear i's weight
  std::vector<std::vector<double>> Gp;
  for (std::size_t i = 1; i < n.groups.size(); ++i) {
    step_params(n, G, before, lr);  // the step of every layer before i
    loss_grads(n, X, Y, Gp);
    pt.add_layer(G[before], Gp[before]);
    load(n.params, saved_p);
    load(n.buffers, saved_b);
    before += n.groups[i].size();
  }
  return pt;
}

LandscapePoint probe_landscape(Net& n, const Tensor& X, const Tensor& Y, const std::vector<std::vector<double>>& G,
                               double loss, const LinearOptions& o) {
  LandscapePoint pt;
  pt.loss = loss;
  const auto saved_p = save(n.params), saved_b = save(n.buffers);
  pt.begin(grad_norm(G));
  std::vector<std::vector<double>> Ge;
  for (int k = 0; k < o.grid; ++k) {
    const double f = o.eta_min * std::pow(o.eta_max / o.eta_min, static_cast<double>(k) / (o.grid - 1));
    const double eta = f * o.lr;
    step_params(n, G, n.params.size(), eta);
    const double le = loss_grads(n, X, Y, Ge);
    pt.add(eta, le, grad_dist(G, Ge));
    load(n.params, saved_p);
    load(n.buffers, saved_b);
  }
  return pt;
}

// Full-batch loss with the noise layers off (BN still in train mode), changing nothing.
double clean_loss(Net& n, const Tensor& X, const Tensor& Y) {
  const auto saved_b = save(n.buffers);
  for (auto& z : n.noises) z->eval();
  double L;
  {
    NoGradGuard ng;
    tapegrad::ModeChecksPause pause;  // a train-mode BatchNorm loss without gradients, buffers restored
    L = layers::mse_loss((*n.seq)(X), Y, layers::Reduction::Sum).item();
  }
  for (auto& z : n.noises) z->train();
  load(n.buffers, saved_b);
  return L;
}

LinearRun train_one(const LinearOptions& o, bool bn, std::uint64_t seed, bool ics, bool landscape,
                    const NoiseOptions* noise = nullptr) {
  LinearRun run;
  run.bn = bn;
  run.noise = noise != nullptr;
  run.seed = seed;
  // Data and A from the seed's data stream; weights from its init stream (equal for BN and plain).
  Generator data_gen(seed * 2 + 1), init(seed * 2 + 2);
  const Tensor X = randn({o.samples, o.width}, Dtype::Float64, data_gen);
  const Tensor A = randn({o.width, o.width}, Dtype::Float64, data_gen);
  Tensor Y;
  {
    NoGradGuard ng;
    Y = matmul(X, transpose(A, 0, 1));
  }
  for (double v : Y.to_vector()) run.target_ss += v * v;
  Net n = build(o, bn, init, noise, 1000 * seed + 500);
  std::vector<std::vector<double>> G;
  for (int t = 0; t <= o.steps; ++t) {
    const double L = loss_grads(n, X, Y, G);
    if (studies::kit::crashed_loss(L)) {
      run.crashed = true;
      run.crash_step = t;
      break;
    }
    if (t % o.every == 0 || t == o.steps) {
      run.loss.emplace_back(t, L);
      if (noise) run.clean_loss.emplace_back(t, clean_loss(n, X, Y));
      if (ics) run.ics.push_back(probe_ics(n, X, Y, G, o.lr)), run.ics.back().step = t;
      if (landscape) run.landscape.push_back(probe_landscape(n, X, Y, G, L, o)), run.landscape.back().step = t;
    }
    if (t < o.steps) step_params(n, G, n.params.size(), o.lr);
  }
  return run;
}

std::string net_name(bool bn) { return bn ? "bn" : "plain"; }

std::string pm(const MeanStd& m, int digits = 3, bool sci = false) {
  using studies::kit::Notation;
  return studies::kit::fmt_mean_std(m, {1, sci ? digits - 1 : digits, sci ? Notation::Scientific : Notation::Fixed});
}

// Window of a run: [lo, hi] steps.
struct Window {
  const char* name;
  int lo, hi;
};
std::vector<Window> windows(const LinearOptions& o) {
  return {{"first 10%", 0, o.steps / 10}, {"last 10%", o.steps - o.steps / 10, o.steps}};
}

template <class P, class F>
double window_mean(const std::vector<P>& pts, const Window& w, F f) {
  double s = 0;
  int n = 0;
  for (const auto& p : pts)
    if (p.step >= w.lo && p.step <= w.hi) s += f(p), ++n;
  return n ? s / n : NAN;
}
double vmean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / static_cast<double>(v.size());
}

// Per-seed values of f for one net, and the paired BN / plain ratios.
template <class F>
void per_seed(const LinearResult& r, F f, std::vector<double>& plain, std::vector<double>& bn, std::vector<double>& ratio) {
  for (const auto& a : r.runs)
    if (!a.bn)
      for (const auto& b : r.runs)
        if (b.bn && b.seed == a.seed) {
          const double pa = a.crashed ? NAN : f(a), pb = b.crashed ? NAN : f(b);
          if (std::isfinite(pa)) plain.push_back(pa);
          if (std::isfinite(pb)) bn.push_back(pb);
          if (std::isfinite(pa) && std::isfinite(pb) && pa != 0) ratio.push_back(pb / pa);
        }
}

// "geometric mean (per seed: a, b, c)" of paired ratios; for cosines (diff = true) the
// paired differences bn − plain, arithmetic mean.
std::string ratio_cell(const std::vector<double>& plain, const std::vector<double>& bn, const std::vector<double>& ratio,
                       bool diff) {
  std::vector<double> v;
  if (diff) {
    if (plain.size() != bn.size()) return "—";
    for (std::size_t i = 0; i < plain.size(); ++i) v.push_back(bn[i] - plain[i]);
  } else {
    v = ratio;
  }
  if (v.empty()) return "—";
  double agg = 0;
  for (double x : v) agg += diff ? x : std::log(x);
  agg /= static_cast<double>(v.size());
  if (!diff) agg = std::exp(agg);
  char buf[64];
  std::snprintf(buf, sizeof buf, diff ? "%+.3f (per seed: " : "%.3g (per seed: ", agg);
  std::string c = buf;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, diff ? "%+.3f" : "%.3g", v[i]);
    c += (i ? ", " : "") + std::string(buf);
  }
  return c + ")";
}

std::string header(const LinearResult& r, const char* title) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims " << title << ": summary\n\n";
  if (!r.description.empty()) {
    md << "- " << r.description << "\n";
  } else {
  md << "- Santurkar et al. 2018's deep linear network: " << o.depth << " Linear(" << o.width << ", " << o.width
     << ") without bias, Glorot uniform, " << o.samples << " samples X ~ N(0, 1), y = x·Aᵀ (A standard Gaussian), "
     << "full-batch GD lr " << fmt9(o.lr) << ", " << o.steps << " steps, summed squared error, float64; bn: "
     << "BatchNorm1d after each Linear but the last\n";
  }
  md << "- probes every " << o.every << " steps; seeds " << studies::kit::seed_range(o)
     << "; per-seed window means, then mean ± std over seeds; ratio = BN / plain, paired by seed\n";
  int crashed = 0;
  for (const auto& run : r.runs) crashed += run.crashed;
  md << "- crashed runs (loss NaN, Inf or > 1e10): " << crashed << "\n";
  md << "- wall time " << fmt4(r.seconds) << " s with " << o.threads << " worker threads\n\n";
  md << "| window | plain loss | bn loss |\n|---|---|---|\n";
  for (const auto& w : windows(o)) {
    std::vector<double> p, b, ra;
    per_seed(r, [&](const LinearRun& x) {
      double s = 0; int n = 0;
      for (auto& [st, l] : x.loss) if (st >= w.lo && st <= w.hi) s += l, ++n;
      return n ? s / n : NAN; }, p, b, ra);
    md << "| " << w.name << " | " << pm(mean_std(p), 3, true) << " | " << pm(mean_std(b), 3, true) << " |\n";
  }
  md << "\n";
  return md.str();
}

}  // namespace

LinearResult run_deep_linear(const LinearOptions& o, bool ics, bool landscape) {
  check_linear_options(o);
  LinearResult r;
  r.options = o;
  r.ics = ics;
  r.landscape = landscape;
  for (bool bn : {false, true}) {
    LinearRun cell;
    cell.bn = bn;
    studies::kit::add_seed_runs(r.runs, cell, o);
  }
  r.seconds = studies::kit::run_grid(r.runs, o.threads, [&](LinearRun& run) {
    run = studies::kit::name_out_of_memory(  // the data and the nets of --depth x --width
        "--depth " + std::to_string(o.depth) + " --width " + std::to_string(o.width),
        [&] { return train_one(o, run.bn, run.seed, ics, landscape); });
    spdlog::info("deep linear {} seed {}: loss {:.4g} -> {:.4g}{}", net_name(run.bn), run.seed,
                 run.loss.empty() ? NAN : run.loss.front().second, run.loss.empty() ? NAN : run.loss.back().second,
                 run.crashed ? " (crashed at step " + std::to_string(run.crash_step) + ")" : "");
  });
  return r;
}

LinearResult run_noisy_linear(const LinearOptions& o, const NoiseOptions& noise) {
  check_linear_options(o);
  check_noise_options(noise);
  LinearResult r;
  r.options = o;
  r.runs = noise_grid<LinearRun>(o);
  r.seconds = studies::kit::run_grid(r.runs, o.threads, [&](LinearRun& run) {
    const bool nz = run.noise;
    run = studies::kit::name_out_of_memory(
        "--depth " + std::to_string(o.depth) + " --width " + std::to_string(o.width),
        [&] { return train_one(o, run.bn, run.seed, false, false, nz ? &noise : nullptr); });
    spdlog::info("deep linear {}{} seed {}: loss {:.4g} -> {:.4g}{}", net_name(run.bn), run.noise ? "+noise" : "", run.seed,
                 run.loss.empty() ? NAN : run.loss.front().second, run.loss.empty() ? NAN : run.loss.back().second,
                 run.crashed ? " (crashed at step " + std::to_string(run.crash_step) + ")" : "");
  });
  return r;
}

std::string ics_csv(const LinearResult& r) {
  std::string out = "net,seed,step,layer,l2,rel,cos\n";
  for (const auto& run : r.runs)
    for (const auto& p : run.ics)
      for (std::size_t i = 0; i < p.l2.size(); ++i)
        out += net_name(run.bn) + "," + std::to_string(run.seed) + "," + std::to_string(p.step) + "," +
               std::to_string(i + 2) + "," + fmt9(p.l2[i]) + "," + fmt9(p.rel[i]) + "," + fmt9(p.cos[i]) + "\n";
  return out;
}

std::string landscape_csv(const LinearResult& r) {
  std::string out = "net,seed,step,loss,loss_min,loss_max,gpred_min,gpred_max,beta,grad_norm\n";
  for (const auto& run : r.runs)
    for (const auto& p : run.landscape)
      out += net_name(run.bn) + "," + std::to_string(run.seed) + "," + std::to_string(p.step) + "," + fmt9(p.loss) + "," +
             fmt9(p.loss_min) + "," + fmt9(p.loss_max) + "," + fmt9(p.gpred_min) + "," + fmt9(p.gpred_max) + "," +
             fmt9(p.beta) + "," + fmt9(p.grad_norm) + "\n";
  return out;
}

std::string ics_summary(const LinearResult& r) {
  std::ostringstream md;
  md << header(r, "ics");
  md << "Definition 2.1 per Linear i = 2.." << r.options.depth << " (layer 1 has no earlier layer), averaged over "
        "layers and the probes of the window.\n\n";
  md << "| window | measure | plain | bn | bn / plain, geometric mean over seeds (cos: bn − plain) |\n|---|---|---|---|---|\n";
  struct M {
    const char* name;
    int which;
  };
  for (const auto& w : windows(r.options))
    for (const M m : {M{"‖G − G'‖₂", 0}, M{"‖G − G'‖₂ / ‖G‖₂", 1}, M{"cos(G, G')", 2}}) {
      std::vector<double> p, b, ra;
      per_seed(r, [&](const LinearRun& x) {
        return window_mean(x.ics, w, [&](const IcsPoint& q) { return vmean(m.which == 0 ? q.l2 : m.which == 1 ? q.rel : q.cos); });
      }, p, b, ra);
      const bool sci = m.which != 2;
      md << "| " << w.name << " | " << m.name << " | " << pm(mean_std(p), 3, sci) << " | " << pm(mean_std(b), 3, sci)
         << " | " << ratio_cell(p, b, ra, m.which == 2) << " |\n";
    }
  return md.str();
}

std::string landscape_summary(const LinearResult& r) {
  std::ostringstream md;
  md << header(r, "landscape");
  md << "Along −g with η on a " << r.options.grid << "-point geometric grid over [" << fmt4(r.options.eta_min) << ", "
     << fmt4(r.options.eta_max) << "]× lr; window means of each probe's value.\n\n";
  md << "| window | measure | plain | bn | bn / plain, geometric mean over seeds |\n|---|---|---|---|---|\n";
  struct M {
    const char* name;
    double (*f)(const LandscapePoint&);
  };
  const M ms[] = {{"loss range max−min", [](const LandscapePoint& p) { return p.loss_max - p.loss_min; }},
                  {"gradient predictiveness max_η ‖Δ∇L‖₂", [](const LandscapePoint& p) { return p.gpred_max; }},
                  {"effective β-smoothness", [](const LandscapePoint& p) { return p.beta; }},
                  {"‖g‖₂", [](const LandscapePoint& p) { return p.grad_norm; }}};
  for (const auto& w : windows(r.options))
    for (const auto& m : ms) {
      std::vector<double> p, b, ra;
      per_seed(r, [&](const LinearRun& x) { return window_mean(x.landscape, w, m.f); }, p, b, ra);
      md << "| " << w.name << " | " << m.name << " | " << pm(mean_std(p), 3, true) << " | " << pm(mean_std(b), 3, true)
         << " | " << ratio_cell(p, b, ra, false) << " |\n";
    }
  return md.str();
}

namespace {
// Per step, over seeds of one net: mean of f (for a log-scale band plot: min and max over seeds too).
template <class P, class F>
std::string step_table(const LinearResult& r, bool bn, const std::vector<P> LinearRun::*pts, F f) {
  std::ostringstream d;
  const LinearRun* first = nullptr;
  for (const auto& run : r.runs)
    if (run.bn == bn && !run.crashed) { first = &run; break; }
  if (!first) return "";
  for (std::size_t k = 0; k < (first->*pts).size(); ++k) {
    const int step = (first->*pts)[k].step;
    std::vector<double> lo, mid, hi;
    for (const auto& run : r.runs)
      if (run.bn == bn && !run.crashed && k < (run.*pts).size()) {
        const auto v = f((run.*pts)[k]);
        lo.push_back(v[0]), mid.push_back(v[1]), hi.push_back(v[2]);
      }
    d << step << " " << fmt9(vmean(lo)) << " " << fmt9(vmean(mid)) << " " << fmt9(vmean(hi)) << "\n";
  }
  return d.str();
}

std::vector<std::string> band_figure(const LinearResult& r, const std::string& dir_s, const std::string& name,
                                     const std::string& title,
                                     const std::vector<std::pair<std::string, std::array<std::string, 2>>>& panels,
                                     bool logy) {
  using studies::kit::gnuplot_text;
  std::ostringstream gp;
  gp << "set terminal pngcairo size " << 520 * panels.size() << ",480 font 'sans,10'\nset output "
     << studies::kit::gnuplot_quote(name + ".png") << "\nset multiplot layout 1," << panels.size() << " title "
     << gnuplot_text(title) << "\n";
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const std::string fp = studies::kit::data_file(dir_s, name + "_" + std::to_string(i) + "_plain.dat", panels[i].second[0]);
    const std::string fb = studies::kit::data_file(dir_s, name + "_" + std::to_string(i) + "_bn.dat", panels[i].second[1]);
    gp << "set xlabel 'step'\nset ylabel " << gnuplot_text(panels[i].first) << "\nset grid\n"
       << (logy ? "set logscale y\n" : "unset logscale y\n") << "set key top right\nplot "
       << fp << " using 1:2:4 with filledcurves fs transparent solid 0.3 lc rgb '#1f77b4' notitle, \\\n     "
       << fp << " using 1:3 with lines lw 2 lc rgb '#1f77b4' title 'plain', \\\n     "
       << fb << " using 1:2:4 with filledcurves fs transparent solid 0.3 lc rgb '#d62728' notitle, \\\n     "
       << fb << " using 1:3 with lines lw 2 lc rgb '#d62728' title 'BN'\n";
  }
  gp << "unset multiplot\n";
  (void)r;
  return studies::kit::render_figure(dir_s, name, gp.str());
}

std::array<double, 3> minmeanmax(const std::vector<double>& v) {
  if (v.empty()) return {NAN, NAN, NAN};
  return {*std::min_element(v.begin(), v.end()), vmean(v), *std::max_element(v.begin(), v.end())};
}
}  // namespace

std::vector<std::string> write_ics(const LinearResult& r, const std::string& dir) {
  if (!studies::kit::write_tables(dir, ics_csv(r), ics_summary(r))) return {};
  auto table = [&](bool bn, int which) {
    return step_table(r, bn, &LinearRun::ics, [&](const IcsPoint& p) {
      return minmeanmax(which == 0 ? p.l2 : which == 1 ? p.rel : p.cos);
    });
  };
  return band_figure(r, dir, "ics",
                     r.figure_name + ", ICS (Santurkar et al. Def. 2.1): line = mean over layers, band = min..max "
                     "over layers (means over " + std::to_string(r.options.seeds) + " seeds)",
                     {{"||G - G'||₂", {table(false, 0), table(true, 0)}},
                      {"||G - G'||₂ / ||G||₂", {table(false, 1), table(true, 1)}}},
                     true);
}

std::vector<std::string> write_landscape(const LinearResult& r, const std::string& dir) {
  if (!studies::kit::write_tables(dir, landscape_csv(r), landscape_summary(r))) return {};
  auto loss = [&](bool bn) {
    return step_table(r, bn, &LinearRun::landscape,
                      [](const LandscapePoint& p) { return std::array<double, 3>{p.loss_min, p.loss, p.loss_max}; });
  };
  auto gpred = [&](bool bn) {
    return step_table(r, bn, &LinearRun::landscape, [](const LandscapePoint& p) {
      return std::array<double, 3>{p.gpred_min, std::sqrt(p.gpred_min * p.gpred_max), p.gpred_max};
    });
  };
  auto beta = [&](bool bn) {
    return step_table(r, bn, &LinearRun::landscape,
                      [](const LandscapePoint& p) { return std::array<double, 3>{p.beta, p.beta, p.beta}; });
  };
  return band_figure(r, dir, "landscape",
                     r.figure_name + " along -g, eta in [" + fmt4(r.options.eta_min) + ", " + fmt4(r.options.eta_max) +
                         "] x lr: bands = min..max over eta (means over " + std::to_string(r.options.seeds) + " seeds)",
                     {{"loss L(W - eta g)", {loss(false), loss(true)}},
                      {"gradient predictiveness ||grad L(W) - grad L(W - eta g)||", {gpred(false), gpred(true)}},
                      {"effective beta-smoothness", {beta(false), beta(true)}}},
                     true);
}

}  // namespace claims
