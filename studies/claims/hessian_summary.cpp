// summary.md of `claims hessian`: per net, one table row per arm and probe step (mean ± std over
// seeds), then the verdicts, each with its rule and its margin over every seed.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "hessian_study.h"
#include "kit_names.h"

namespace claims {

namespace {

// The probes of (net, arm) by (seed, step).
using Probes = std::map<std::pair<std::uint64_t, std::int64_t>, const HessianPoint*>;
Probes probes_of(const HessianResult& r, const std::string& net, const std::string& arm) {
  Probes m;
  for (const auto& p : r.points)
    if (p.net == net && p.arm == arm) m[{p.seed, p.step}] = &p;
  return m;
}

double ratio_of(const HessianPoint& p) { return p.probe.lambda_max / p.probe.bulk_edge; }
bool early(std::int64_t step) { return step > 0 && step <= 100; }

std::string ms(const std::vector<double>& v) {
  const MeanStd m = mean_std(v);
  return fmt4(m.mean) + " ± " + fmt4(m.std);
}

std::string verdict(bool ok) { return ok ? "**supported**" : "**not supported**"; }

// "Outliers early": at every probe in steps 1-100 every seed has >= 1 outlier and
// λ_max >= 2 x the bulk edge. Returns false when no probe is in that window.
struct Early {
  bool any = false;
  int min_outliers = 1 << 30, max_outliers = 0;
  double min_ratio = INFINITY, max_ratio = 0;
};
Early early_of(const Probes& m) {
  Early e;
  for (const auto& [k, p] : m)
    if (early(k.second)) {
      e.any = true;
      e.min_outliers = std::min(e.min_outliers, p->probe.outliers);
      e.max_outliers = std::max(e.max_outliers, p->probe.outliers);
      e.min_ratio = std::min(e.min_ratio, ratio_of(*p));
      e.max_ratio = std::max(e.max_ratio, ratio_of(*p));
    }
  return e;
}

// The gradient's top-k share over every probe from step 10, every seed.
std::pair<double, double> share_range(const Probes& m) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [k, p] : m)
    if (k.second >= 10) {
      lo = std::min(lo, p->probe.gradient_share);
      hi = std::max(hi, p->probe.gradient_share);
    }
  return {lo, hi};
}

}  // namespace

std::string hessian_summary(const HessianResult& r) {
  const HessianOptions& o = r.options;
  std::ostringstream s;
  s << "# Hessian spectrum over training (Ghorbani, Krishnan & Xiao 2019)\n\n"
    << "Arms: " << o.arms.size() << " (";
  for (std::size_t i = 0; i < o.arms.size(); ++i) s << (i ? ", " : "") << o.arms[i];
  s << "); " << o.seeds << " seeds from " << o.seed << "; top-" << o.spectrum.top_k << " by Lanczos, SLQ "
    << o.spectrum.slq.probes << " probes x " << o.spectrum.slq.steps << " steps, sigma = " << fmt4(o.spectrum.sigma_fraction)
    << " x range. Outliers: top-k eigenvalues above the bulk edge (the upper end of the heaviest interval of "
       "{phi >= 1e-4 max phi}). Share: the gradient's energy in the top-k Ritz space (chance: k / params). "
       "bn: Hessian in train mode, the Hessian set in chunks of the SGD batch size; bn-population: the whole "
       "training set's BN statistics, recomputed every " << o.population_every << " steps.\n";
  const auto has = [&](const char* a) { return std::find(o.arms.begin(), o.arms.end(), a) != o.arms.end(); };
  for (const auto& net : o.nets) {
    s << "\n## " << net << " MLP\n\n| arm | step | loss | lambda_max | bulk edge | lambda_max / edge | outliers | share (top-"
      << o.spectrum.top_k << ") |\n|---|---|---|---|---|---|---|---|\n";
    std::map<std::string, Probes> by_arm;
    std::map<std::string, std::int64_t> params;
    for (const auto& arm : o.arms) {
      by_arm[arm] = probes_of(r, net, arm);
      for (auto step : o.steps) {
        std::vector<double> loss, lmax, edge, ratio, outl, share;
        for (const auto& [k, p] : by_arm[arm]) {
          if (k.second != step) continue;
          params[arm] = p->params;
          loss.push_back(p->loss);
          lmax.push_back(p->probe.lambda_max);
          edge.push_back(p->probe.bulk_edge);
          ratio.push_back(ratio_of(*p));
          outl.push_back(p->probe.outliers);
          share.push_back(p->probe.gradient_share);
        }
        if (loss.empty()) continue;
        s << "| " << arm << " | " << step << " | " << ms(loss) << " | " << ms(lmax) << " | " << ms(edge) << " | "
          << ms(ratio) << " | " << ms(outl) << " | " << ms(share) << " |\n";
      }
    }
    s << "\nParameters:";
    for (const auto& [arm, n] : params)
      s << " " << arm << " " << n << " (chance share " << fmt4(static_cast<double>(o.spectrum.top_k) / n) << ");";
    s << "\n\n";
    if (has("plain")) {
      const Early e = early_of(by_arm["plain"]);
      if (e.any)
        s << "- Finding 1, no-BN half (outliers appear early): " << verdict(e.min_outliers >= 1 && e.min_ratio >= 2)
          << " — rule: at every probe in steps 1–100, every seed has >= 1 outlier and lambda_max >= 2 x the bulk "
             "edge; margin: min outliers " << e.min_outliers << ", min lambda_max / edge " << fmt4(e.min_ratio) << ".\n";
      const auto [lo, hi] = share_range(by_arm["plain"]);
      if (std::isfinite(lo))
        s << "- Finding 2, no-BN half (the gradient lives in the top eigenspace): " << verdict(lo >= 0.5)
          << " — rule: share >= 0.5 at every probe from step 10, every seed; margin: min share " << fmt4(lo) << ".\n";
    }
    if (has("bn")) {
      const Early e = early_of(by_arm["bn"]);
      if (e.any)
        s << "- Finding 1, BN half (almost no outliers with BN): " << verdict(e.max_ratio < 2)
          << " — rule: at every probe in steps 1–100, every seed, lambda_max < 2 x the bulk edge (no eigenvalue "
             "stands out by the no-BN half's criterion); margin: max lambda_max / edge " << fmt4(e.max_ratio)
          << " (outliers above the edge: " << e.min_outliers << "–" << e.max_outliers << ").\n";
      const auto [lo, hi] = share_range(by_arm["bn"]);
      if (std::isfinite(hi))
        s << "- Finding 2, BN half (the gradient is not concentrated with BN): " << verdict(hi < 0.5)
          << " — rule: share < 0.5 at every probe from step 10, every seed; margin: max share " << fmt4(hi) << ".\n";
    }
    if (has("bn-population")) {
      const Early e = early_of(by_arm["bn-population"]);
      if (e.any)
        s << "- Finding 3 (population-statistics BN brings the outliers back): "
          << verdict(e.min_outliers >= 1 && e.min_ratio >= 2)
          << " — rule: the no-BN half's rule of finding 1 holds for bn-population; margin: min outliers "
          << e.min_outliers << ", min lambda_max / edge " << fmt4(e.min_ratio) << ".\n";
      if (has("bn")) {
        // "and trains slower": the probed loss at the last step, seed by seed
        const std::int64_t last = o.steps.back();
        double min_ratio = INFINITY;
        int n = 0;
        for (const auto& [k, p] : by_arm["bn-population"]) {
          const auto q = by_arm["bn"].find(k);
          if (k.second != last || q == by_arm["bn"].end()) continue;
          min_ratio = std::min(min_ratio, p->loss / q->second->loss);
          ++n;
        }
        if (n > 0)
          s << "- Finding 3, slower training: " << verdict(min_ratio > 1)
            << " — rule: at step " << last << " bn-population's loss is above bn's in every seed; margin: min loss "
               "ratio bn-population / bn " << fmt4(min_ratio) << ".\n";
      }
    }
    if (has("plain") && has("bn")) {
      double max_ratio = 0, min_ratio = INFINITY;
      for (const auto& [k, p] : by_arm["bn"]) {
        const auto q = by_arm["plain"].find(k);
        if (k.second < 10 || q == by_arm["plain"].end()) continue;
        const double x = p->probe.lambda_max / q->second->probe.lambda_max;
        max_ratio = std::max(max_ratio, x);
        min_ratio = std::min(min_ratio, x);
      }
      if (std::isfinite(min_ratio))
        s << "- Santurkar et al. (BN gives a smaller lambda_max): " << verdict(max_ratio < 1)
          << " — rule: lambda_max(bn) < lambda_max(plain) at every probe from step 10, seed by seed (the same "
             "initial W, b); margin: lambda_max(bn) / lambda_max(plain) from " << fmt4(min_ratio) << " to "
          << fmt4(max_ratio) << ".\n";
    }
  }
  s << "\nWall time: " << fmt4(r.seconds) << " s.\n";
  return s.str();
}

}  // namespace claims
