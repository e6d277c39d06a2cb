#include "linear_lr_sweep.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/gnuplot.h"
#include "kit/stats.h"

namespace claims {

using studies::kit::mean_std;
using studies::kit::fmt4;
using studies::kit::fmt9;

LinearSweepOptions quick_linear_sweep_options(LinearSweepOptions o) {
  o.linear.seeds = 2;
  o.steps = 100;
  o.lr_min = 1e-7;
  o.lr_max = 1e-5;
  return o;
}

void check_linear_sweep_options(const LinearSweepOptions& o) {
  LinearOptions l = o.linear;
  l.steps = o.steps;
  check_linear_options(l);
  if (!(o.lr_min > 0 && std::isfinite(o.lr_max) && o.lr_max >= o.lr_min))
    throw std::invalid_argument("--lr-min/--lr-max: expected 0 < min <= max, got " + fmt9(o.lr_min) + " " + fmt9(o.lr_max));
}

LinearSweepResult run_linear_lr_sweep(const LinearSweepOptions& o) {
  check_linear_sweep_options(o);
  LinearSweepResult r;
  r.options = o;
  for (int k = 0;; ++k) {
    const double lr = o.lr_min * std::pow(10.0, 0.5 * k);
    if (lr > o.lr_max * (1 + 1e-9)) break;
    r.rates.push_back(lr);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (double lr : r.rates) {
    LinearOptions l = o.linear;
    l.lr = lr;
    l.steps = o.steps;
    l.every = std::max(1, o.steps / 20);
    const LinearResult lr_runs = run_deep_linear(l, false, false);  // plain then BN, every seed; workers inside
    for (const auto& x : lr_runs.runs) {
      LinearSweepRun s;
      s.bn = x.bn, s.seed = x.seed, s.lr = lr;
      s.first_loss = x.loss.empty() ? NAN : x.loss.front().second;
      s.diverged = x.crashed;
      for (auto& [st, L] : x.loss)
        if (!(L <= 10 * s.first_loss)) s.diverged = true;
      s.final_loss = s.diverged ? NAN : x.loss.back().second;
      r.runs.push_back(s);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string linear_sweep_csv(const LinearSweepResult& r) {
  std::string out = "net,seed,lr,diverged,first_loss,final_loss\n";
  for (const auto& x : r.runs)
    out += std::string(x.bn ? "bn" : "plain") + "," + std::to_string(x.seed) + "," + fmt9(x.lr) + "," +
           (x.diverged ? "1" : "0") + "," + fmt9(x.first_loss) + "," + fmt9(x.final_loss) + "\n";
  return out;
}

std::string linear_sweep_summary(const LinearSweepResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims lr-sweep-linear: summary\n\n";
  md << "- Santurkar et al.'s deep linear network (" << o.linear.depth << " Linear(" << o.linear.width << ", "
     << o.linear.width << "), " << o.linear.samples << " samples, summed squared error, float64), full-batch GD for "
     << o.steps << " steps, lr " << fmt4(o.lr_min) << " .. " << fmt4(o.lr_max) << " in √10 steps; seeds " << o.linear.seed
     << ".." << o.linear.seed + static_cast<std::uint64_t>(o.linear.seeds) - 1 << "\n";
  md << "- diverged: loss NaN, Inf, > 1e10 or > 10× the initial at any of 20 recorded steps; wall time " << fmt4(r.seconds)
     << " s with " << o.linear.threads << " worker threads\n\n";
  md << "| net | first diverging lr (per seed) | stable range (decades from lr_min) |\n|---|---|---|\n";
  for (bool bn : {false, true}) {
    std::string firsts;
    std::vector<double> dec;
    for (int s = 0; s < o.linear.seeds; ++s) {
      const std::uint64_t seed = o.linear.seed + static_cast<std::uint64_t>(s);
      std::size_t k = 0;
      for (; k < r.rates.size(); ++k) {
        bool div = false;
        for (const auto& x : r.runs)
          if (x.bn == bn && x.seed == seed && x.lr == r.rates[k]) div = x.diverged;
        if (div) break;
      }
      firsts += (s ? ", " : "") + (k < r.rates.size() ? fmt4(r.rates[k]) : "none ≤ " + fmt4(o.lr_max));
      dec.push_back(0.5 * static_cast<double>(k));
    }
    const auto m = mean_std(dec);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f ± %.2f", m.mean, m.std);
    md << "| " << (bn ? "bn" : "plain") << " | " << firsts << " | " << buf << " |\n";
  }
  md << "\n| lr | plain final loss | bn final loss | bn / plain (geometric mean; per seed) |\n|---|---|---|---|\n";
  for (double lr : r.rates) {
    std::vector<double> p, b, ratio;
    int pd = 0, bd = 0;
    for (int s = 0; s < o.linear.seeds; ++s) {
      const std::uint64_t seed = o.linear.seed + static_cast<std::uint64_t>(s);
      const LinearSweepRun *rp = nullptr, *rb = nullptr;
      for (const auto& x : r.runs)
        if (x.seed == seed && x.lr == lr) (x.bn ? rb : rp) = &x;
      if (rp->diverged) ++pd; else p.push_back(rp->final_loss);
      if (rb->diverged) ++bd; else b.push_back(rb->final_loss);
      if (!rp->diverged && !rb->diverged) ratio.push_back(rb->final_loss / rp->final_loss);
    }
    auto cell = [](const std::vector<double>& v, int div) {
      if (v.empty()) return std::string("diverged (") + std::to_string(div) + ")";
      const auto m = mean_std(v);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3g ± %.2g", m.mean, m.std);
      return std::string(buf) + (div ? " (" + std::to_string(div) + " diverged)" : "");
    };
    std::string rc = "—";
    if (!ratio.empty()) {
      double g = 0;
      for (double v : ratio) g += std::log(v);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g (", std::exp(g / ratio.size()));
      rc = buf;
      for (std::size_t i = 0; i < ratio.size(); ++i) std::snprintf(buf, sizeof buf, "%s%.3g", i ? ", " : "", ratio[i]), rc += buf;
      rc += ")";
    }
    md << "| " << fmt4(lr) << " | " << cell(p, pd) << " | " << cell(b, bd) << " | " << rc << " |\n";
  }
  return md.str();
}

void write_linear_sweep(const LinearSweepResult& r, const std::string& dir) {
  studies::kit::write_tables(dir, linear_sweep_csv(r), linear_sweep_summary(r));
}

}  // namespace claims
