#include "noisy_bn.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "kit/gnuplot.h"
#include "kit/stats.h"
#include "kit_names.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"

namespace claims {

using namespace tapegrad;

NoisyOptions quick_noisy_options(NoisyOptions o) {
  o = studies::kit::with_quick_size(o, {.seeds = 2, .epochs = 1, .train_size = 2048, .test_size = 2000});
  o.linear.steps = 100;
  o.linear.every = 25;
  return o;
}

void check_noisy_options(const NoisyOptions& o) {
  check_noise_options(o.noise);
  check_linear_options(o.linear);
  studies::kit::check_training_options(o);
}

namespace {

std::string variant(bool bn, bool noise) { return std::string(bn ? "bn" : "plain") + (noise ? "+noise" : ""); }

std::string pm(const MeanStd& m, double scale, int digits, bool sci = false) {
  using studies::kit::Notation;
  return studies::kit::fmt_mean_std(m, {scale, digits, sci ? Notation::Scientific : Notation::Fixed});
}

// Final loss of a deep linear run: the clean loss (noise off) for noise runs; NaN when crashed.
double linear_final(const LinearRun& x) {
  if (x.crashed) return NAN;
  return x.noise ? x.clean_loss.back().second : x.loss.back().second;
}
// Mean over the last 10% of the probes of the (clean) loss.
double linear_tail(const LinearRun& x, int steps) {
  if (x.crashed) return NAN;
  const auto& v = x.noise ? x.clean_loss : x.loss;
  double s = 0;
  int n = 0;
  for (auto& [st, l] : v)
    if (st >= steps - steps / 10) s += l, ++n;
  return n ? s / n : NAN;
}

const LinearRun* find_linear(const LinearResult& r, bool bn, bool noise, std::uint64_t seed) {
  for (const auto& x : r.runs)
    if (x.bn == bn && x.noise == noise && x.seed == seed) return &x;
  return nullptr;
}
const NoisyMlpRun* find_mlp(const NoisyResult& r, bool bn, bool noise, std::uint64_t seed) {
  for (const auto& x : r.runs)
    if (x.bn == bn && x.noise == noise && x.seed == seed) return &x;
  return nullptr;
}

// "g (per seed: a, b, c)" of paired ratios (geometric) or differences (arithmetic).
std::string paired(const std::vector<double>& v, bool ratio, double scale = 1) {
  if (v.empty()) return "—";
  double agg = 0;
  for (double x : v) agg += ratio ? std::log(x) : x;
  agg /= static_cast<double>(v.size());
  if (ratio) agg = std::exp(agg);
  char buf[64];
  std::snprintf(buf, sizeof buf, ratio ? "%.3g (per seed: " : "%+.2f (per seed: ", ratio ? agg : scale * agg);
  std::string c = buf;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, ratio ? "%.3g" : "%+.2f", ratio ? v[i] : scale * v[i]);
    c += (i ? ", " : "") + std::string(buf);
  }
  return c + ")";
}

}  // namespace

NoisyResult run_noisy_bn(const NoisyOptions& o, const studies::kit::StudyData& d) {
  check_noisy_options(o);
  NoisyResult r;
  r.options = o;
  const auto t0 = std::chrono::steady_clock::now();
  LinearOptions lo = o.linear;
  static_cast<studies::kit::SeedOptions&>(lo) = o;  // the MLP's seeds and workers
  r.linear = run_noisy_linear(lo, o.noise);
  r.runs = noise_grid<NoisyMlpRun>(o);
  studies::kit::run_jobs(r.runs.size(), o.threads, [&](std::size_t k) {
    auto& run = r.runs[k];
    MlpSpec spec;
    spec.hidden = o.hidden;
    spec.bn = run.bn;
    if (run.noise) spec.noise = o.noise;
    spec.noise_seed = 1000 * run.seed + 500;
    Generator init(run.seed);
    Mlp m = build_mlp(spec, d.train.num_features(), 10, init);
    const TrainSpec t{.epochs = o.epochs, .batch = o.batch, .lr = o.lr, .shuffle_seed = run.seed + 1000003};
    run.out = train_mlp(m, t, d);
    spdlog::info("noisy-bn mlp {} seed {}: loss {:.4g}, test {:.4g}%", variant(run.bn, run.noise), run.seed,
                 run.out.last_epoch_loss, 100 * run.out.test_acc);
  });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string noisy_csv(const NoisyResult& r) {
  std::string out = "model,net,seed,step,loss,clean_loss,train_acc,test_acc,crashed\n";
  for (const auto& x : r.linear.runs)
    for (std::size_t k = 0; k < x.loss.size(); ++k)
      out += "deep_linear," + variant(x.bn, x.noise) + "," + std::to_string(x.seed) + "," + std::to_string(x.loss[k].first) +
             "," + fmt9(x.loss[k].second) + "," + (x.noise ? fmt9(x.clean_loss[k].second) : fmt9(x.loss[k].second)) + ",,," +
             (x.crashed ? "1" : "0") + "\n";
  for (const auto& x : r.runs)
    out += "mlp," + variant(x.bn, x.noise) + "," + std::to_string(x.seed) + ",," + fmt9(x.out.last_epoch_loss) + ",," +
           fmt9(x.out.train_acc) + "," + fmt9(x.out.test_acc) + "," + (x.out.crashed ? "1" : "0") + "\n";
  return out;
}

std::string noisy_summary(const NoisyResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims noisy-bn: summary\n\n";
  md << "- noise (Santurkar et al. 2018, Algorithm 1) after each hidden layer's BN (or its Linear): per unit and step "
        "μ ~ U(−" << fmt4(o.noise.mean_range) << ", " << fmt4(o.noise.mean_range) << "), σ ~ U(1, " << fmt4(o.noise.scale_max)
     << "); per sample m ~ N(μ, r²), s ~ N(σ, r²), r = " << fmt4(o.noise.jitter) << "; y = s·x + m; off in eval mode\n";
  md << "- deep linear network: " << o.linear.depth << " Linear(" << o.linear.width << ", " << o.linear.width << "), "
     << o.linear.samples << " samples, full-batch GD lr " << fmt9(o.linear.lr) << ", " << o.linear.steps
     << " steps; loss = summed squared error, for noise runs with the noise off (BN on the full batch)\n";
  md << "- MLP " << studies::kit::mlp_layers(o.hidden)
     << " on Fashion-MNIST, " << o.train_size << " training images, SGD momentum 0.9 lr " << fmt4(o.lr) << ", batch "
     << o.batch << ", " << o.epochs << " epochs; accuracies in eval mode (noise off)\n";
  md << "- seeds " << studies::kit::seed_range(o) << "; wall time " << fmt4(r.seconds)
     << " s with " << o.threads << " worker threads\n\n";

  md << "## Deep linear network\n\n| net | final loss | mean loss, last 10 % | crashed |\n|---|---|---|---|\n";
  for (bool bn : {false, true})
    for (bool nz : {false, true}) {
      std::vector<double> f, t;
      int crashed = 0;
      for (int s = 0; s < o.seeds; ++s) {
        const LinearRun* x = find_linear(r.linear, bn, nz, o.seed + static_cast<std::uint64_t>(s));
        if (x->crashed) { ++crashed; continue; }
        f.push_back(linear_final(*x));
        t.push_back(linear_tail(*x, o.linear.steps));
      }
      md << "| " << variant(bn, nz) << " | " << pm(mean_std(f), 1, 2, true) << " | " << pm(mean_std(t), 1, 2, true) << " | "
         << crashed << " |\n";
    }
  md << "\n| paired ratio of the last-10 % loss | geometric mean (per seed) |\n|---|---|\n";
  struct P { bool bn1, n1, bn2, n2; };
  for (const P p : {P{true, true, true, false}, P{true, true, false, false}, P{true, false, false, false}, P{false, true, false, false}}) {
    std::vector<double> v;
    for (int s = 0; s < o.seeds; ++s) {
      const auto seed = o.seed + static_cast<std::uint64_t>(s);
      const double a = linear_tail(*find_linear(r.linear, p.bn1, p.n1, seed), o.linear.steps);
      const double b = linear_tail(*find_linear(r.linear, p.bn2, p.n2, seed), o.linear.steps);
      if (std::isfinite(a) && std::isfinite(b) && b > 0) v.push_back(a / b);
    }
    md << "| " << variant(p.bn1, p.n1) << " / " << variant(p.bn2, p.n2) << " | " << paired(v, true) << " |\n";
  }

  md << "\n## Fashion-MNIST MLP\n\n| net | last-epoch train loss | train acc (%) | test acc (%) | crashed |\n|---|---|---|---|---|\n";
  for (bool bn : {false, true})
    for (bool nz : {false, true}) {
      std::vector<double> l, tr, te;
      int crashed = 0;
      for (int s = 0; s < o.seeds; ++s) {
        const NoisyMlpRun* x = find_mlp(r, bn, nz, o.seed + static_cast<std::uint64_t>(s));
        if (x->out.crashed) { ++crashed; continue; }
        l.push_back(x->out.last_epoch_loss), tr.push_back(x->out.train_acc), te.push_back(x->out.test_acc);
      }
      md << "| " << variant(bn, nz) << " | " << pm(mean_std(l), 1, 4) << " | " << pm(mean_std(tr), 100, 2) << " | "
         << pm(mean_std(te), 100, 2) << " | " << crashed << " |\n";
    }
  md << "\n| paired test-accuracy difference (points) | mean (per seed) |\n|---|---|\n";
  for (const P p : {P{true, true, true, false}, P{true, true, false, false}, P{true, false, false, false}, P{false, true, false, false}}) {
    std::vector<double> v;
    for (int s = 0; s < o.seeds; ++s) {
      const auto seed = o.seed + static_cast<std::uint64_t>(s);
      const auto* a = find_mlp(r, p.bn1, p.n1, seed);
      const auto* b = find_mlp(r, p.bn2, p.n2, seed);
      if (!a->out.crashed && !b->out.crashed) v.push_back(a->out.test_acc - b->out.test_acc);
    }
    md << "| " << variant(p.bn1, p.n1) << " − " << variant(p.bn2, p.n2) << " | " << paired(v, false, 100) << " |\n";
  }
  return md.str();
}

std::vector<std::string> write_noisy(const NoisyResult& r, const std::string& dir_s) {
  if (!studies::kit::write_tables(dir_s, noisy_csv(r), noisy_summary(r))) return {};
  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,520 font 'sans,10'\nset output 'noisy_bn.png'\nset title "
     << studies::kit::gnuplot_text("Deep linear network: loss (noise runs: with the noise off), mean over " +
                                 std::to_string(r.options.seeds) + " seeds")
     << "\nset xlabel 'step'\nset ylabel 'summed squared error'\nset logscale y\nset grid\nset key top right\nplot ";
  const char* colors[] = {"#1f77b4", "#17becf", "#d62728", "#ff7f0e"};
  int c = 0;
  for (bool bn : {false, true})
    for (bool nz : {false, true}) {
      std::ostringstream d;
      const LinearRun* first = find_linear(r.linear, bn, nz, r.options.seed);
      for (std::size_t k = 0; first && k < first->loss.size(); ++k) {
        double s = 0;
        int n = 0;
        for (const auto& x : r.linear.runs)
          if (x.bn == bn && x.noise == nz && k < x.loss.size()) s += (nz ? x.clean_loss[k] : x.loss[k]).second, ++n;
        d << first->loss[k].first << " " << fmt9(s / n) << "\n";
      }
      const std::string f = studies::kit::data_file(dir_s, "noisy_" + variant(bn, nz) + ".dat", d.str());
      gp << (c ? ", \\\n     " : "") << f << " using 1:2 with lines lw 2 lc rgb '" << colors[c] << "' title "
         << studies::kit::gnuplot_text(variant(bn, nz));
      ++c;
    }
  gp << "\n";
  return studies::kit::render_figure(dir_s, "noisy_bn", gp.str());
}

}  // namespace claims
