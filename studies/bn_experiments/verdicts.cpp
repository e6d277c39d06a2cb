#include "verdicts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "kit/data.h"
#include "kit/option_checks.h"

namespace bnexp {

using studies::kit::fmt4;
using tapegrad::models::Norm;

Baseline constant_predictor(const StudyOptions& o) {
  std::vector<double> tr, te;
  for (int k = 0; k < o.seeds; ++k) {
    const studies::kit::Dataset d = studies::kit::make_chapter_data(o.seed + static_cast<std::uint64_t>(k));
    const auto y_train = d.y_train.to_vector(), y_test = d.y_test.to_vector();
    double mean = 0;
    for (double v : y_train) mean += v;
    mean /= static_cast<double>(y_train.size());
    auto mse = [mean](const std::vector<double>& y) {
      double s = 0;
      for (double v : y) s += (v - mean) * (v - mean);
      return s / static_cast<double>(y.size());
    };
    tr.push_back(mse(y_train));
    te.push_back(mse(y_test));
  }
  return {mean_std(tr), mean_std(te)};
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

std::string pm(const MeanStd& m) { return studies::kit::fmt_mean_std(m, {1, 4, studies::kit::Notation::General}); }
std::string arm_name(Norm n) {
  switch (n) {
    case Norm::Batch: return "BN";
    case Norm::Layer: return "LayerNorm";
    case Norm::Group: return "GroupNorm";
    case Norm::None: return "plain";
  }
  return "?";
}

// One run of the study as the verdicts read it, under one evaluation policy.
struct Run {
  bool crashed = false;
  double epochs_to_target = kNever;  // kNever: not reached (or crashed first)
  double rise = 0, final_train = 0;
};

// The runs of one experiment, by (norm, lr, depth) and seed.
class Runs {
 public:
  Runs(const StudyResult& s, const std::string& experiment, EvalPolicy pol) {
    for (std::size_t i = 0; i < s.jobs.size(); ++i) {
      const Job& j = s.jobs[i];
      if (j.experiment != experiment) continue;
      const auto& pols = j.run.policies;
      const auto at = std::find(pols.begin(), pols.end(), pol);
      if (at == pols.end()) continue;
      const auto& r = s.results[i];
      const auto& curve = r.loss[static_cast<std::size_t>(at - pols.begin())][0];
      Run run;
      run.crashed = r.crashed;
      if (!r.crashed && !curve.empty()) {
        if (const int e = epochs_to_reach(curve, s.options.target_loss); e > 0) run.epochs_to_target = e;
        run.rise = rise_fraction(curve);
        run.final_train = curve.back();
      }
      runs_[{j.run.norm, j.run.lr, j.run.depth()}][j.run.seed] = run;
      lrs_.push_back(j.run.lr);
      depths_.push_back(j.run.depth());
    }
    for (auto* v : {&lrs_}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    std::sort(depths_.begin(), depths_.end());
    depths_.erase(std::unique(depths_.begin(), depths_.end()), depths_.end());
  }
  bool empty() const { return runs_.empty(); }
  const std::vector<double>& lrs() const { return lrs_; }
  const std::vector<int>& depths() const { return depths_; }
  // Runs of one net by seed (empty when the study has none).
  const std::map<std::uint64_t, Run>& of(Norm n, double lr, int depth) const {
    static const std::map<std::uint64_t, Run> none;
    auto it = runs_.find({n, lr, depth});
    return it == runs_.end() ? none : it->second;
  }
  // Seed pairs (normalised, plain) of one (lr, depth).
  std::vector<std::pair<Run, Run>> pairs(Norm normed, double lr, int depth) const {
    std::vector<std::pair<Run, Run>> out;
    const auto& a = of(normed, lr, depth);
    const auto& b = of(Norm::None, lr, depth);
    for (const auto& [seed, run] : a)
      if (auto it = b.find(seed); it != b.end()) out.emplace_back(run, it->second);
    return out;
  }

 private:
  std::map<std::tuple<Norm, double, int>, std::map<std::uint64_t, Run>> runs_;
  std::vector<double> lrs_;
  std::vector<int> depths_;
};

struct Reach {
  MeanStd epochs;  // over the runs that reached the target
  int reached = 0, runs = 0, crashed = 0;
};
Reach reach_of(const std::map<std::uint64_t, Run>& runs) {
  Reach r;
  std::vector<double> e;
  for (const auto& [seed, run] : runs) {
    ++r.runs;
    if (run.crashed) ++r.crashed;
    if (run.epochs_to_target != kNever) e.push_back(run.epochs_to_target);
  }
  r.epochs = mean_std(e);
  r.reached = static_cast<int>(e.size());
  return r;
}
std::string reach_text(const Reach& r) {
  return (r.reached ? pm(r.epochs) + " epochs" : std::string("never")) + " (" + std::to_string(r.reached) + "/" +
         std::to_string(r.runs) + " reach it)";
}

// The sign of every seed pair: "holds" when the normalised net wins every informative pair,
// "does not hold" when the plain net wins every one, "not supported" otherwise.
std::string sign_verdict(int normed_wins, int plain_wins) {
  if (normed_wins + plain_wins == 0) return "not supported";
  if (plain_wins == 0) return "holds";
  if (normed_wins == 0) return "does not hold";
  return "not supported";
}

std::string policy_phrase(EvalPolicy p) { return policy_name(p) + "-mode evaluation"; }

Verdict converges_faster(const StudyResult& s, Norm normed, EvalPolicy pol) {
  Verdict v{arm_name(normed) + " converges faster", "", "not measured", "", ""};
  v.rule = "epochs until the full-train-set loss is ≤ " + fmt_g(s.options.target_loss) +
           ", seed by seed (a run that never gets there, or crashes, is slower than any that does): holds when the "
           "normalised net is faster in every seed pair, does not hold when the plain net is, not supported "
           "otherwise";
  const Runs runs(s, "convergence", pol);
  if (runs.empty()) return v;
  const double lr = runs.lrs().front();
  const int depth = runs.depths().front();
  v.setup = "convergence, lr " + fmt_g(lr) + ", " + std::to_string(depth) + " layers, " + policy_phrase(pol);
  int nw = 0, pw = 0;
  std::vector<double> gap;
  for (const auto& [a, b] : runs.pairs(normed, lr, depth)) {
    if (a.epochs_to_target == kNever && b.epochs_to_target == kNever) continue;
    if (a.epochs_to_target < b.epochs_to_target) ++nw;
    if (b.epochs_to_target < a.epochs_to_target) ++pw;
    if (a.epochs_to_target != kNever && b.epochs_to_target != kNever) gap.push_back(b.epochs_to_target - a.epochs_to_target);
  }
  v.verdict = sign_verdict(nw, pw);
  v.evidence = arm_name(normed) + " " + reach_text(reach_of(runs.of(normed, lr, depth))) + ", plain " +
               reach_text(reach_of(runs.of(Norm::None, lr, depth))) + "; " + arm_name(normed) + " faster in " +
               std::to_string(nw) + " of " + std::to_string(nw + pw) + " seed pairs";
  if (!gap.empty()) v.evidence += ", by " + pm(mean_std(gap)) + " epochs";
  // The other evaluation policy's count, when the study has it: it changes the number a lot.
  for (EvalPolicy other : s.resolved.policies)
    if (other != pol) {
      const Runs o(s, "convergence", other);
      v.evidence += " (" + policy_phrase(other) + ": " + arm_name(normed) + " " +
                    reach_text(reach_of(o.of(normed, lr, depth))) + ")";
    }
  return v;
}

Verdict smoother(const StudyResult& s, Norm normed, EvalPolicy pol) {
  Verdict v{arm_name(normed) + "'s loss descends more smoothly", "", "not measured", "", ""};
  v.rule = "the fraction of epochs whose train loss rose, seed by seed: holds when it is smaller for the "
           "normalised net in every seed pair, does not hold when it is larger in every pair, not supported "
           "otherwise";
  const Runs runs(s, "convergence", pol);
  if (runs.empty()) return v;
  const double lr = runs.lrs().front();
  const int depth = runs.depths().front();
  v.setup = "convergence, lr " + fmt_g(lr) + ", " + policy_phrase(pol);
  int nw = 0, pw = 0;
  std::vector<double> a_rise, b_rise;
  for (const auto& [a, b] : runs.pairs(normed, lr, depth)) {
    if (a.crashed || b.crashed) continue;
    a_rise.push_back(a.rise);
    b_rise.push_back(b.rise);
    if (a.rise < b.rise) ++nw;
    if (b.rise < a.rise) ++pw;
  }
  v.verdict = sign_verdict(nw, pw);
  v.evidence = "train loss rises in " + pm(mean_std(a_rise)) + " of epochs (" + arm_name(normed) + ") vs " +
               pm(mean_std(b_rise)) + " (plain); smoother in " + std::to_string(nw) + " of " +
               std::to_string(a_rise.size()) + " seed pairs";
  return v;
}

// Largest lr of the sweep at and below which no run of the net crashed; nullopt when it
// crashes at the smallest.
std::optional<double> largest_stable_lr(const Runs& runs, Norm n, int depth) {
  std::optional<double> best;
  for (double lr : runs.lrs()) {
    if (reach_of(runs.of(n, lr, depth)).crashed > 0) break;
    best = lr;
  }
  return best;
}

Verdict larger_learning_rates(const StudyResult& s, Norm normed, EvalPolicy pol) {
  Verdict v{arm_name(normed) + " tolerates larger learning rates", "", "not measured", "", ""};
  v.rule = "the largest learning rate of the sweep at and below which no seed crashes: holds when the normalised "
           "net's is larger, does not hold when it is smaller, not supported when they are equal (the sweep does "
           "not separate the nets)";
  const Runs runs(s, "learning-rate", pol);
  if (runs.empty()) return v;
  const int depth = runs.depths().front();
  std::string sweep;
  for (double lr : runs.lrs()) { if (!sweep.empty()) sweep += ", "; sweep += fmt_g(lr); }
  v.setup = "learning-rate, lr " + sweep + ", " + policy_phrase(pol);
  const auto a = largest_stable_lr(runs, normed, depth), b = largest_stable_lr(runs, Norm::None, depth);
  auto lr_text = [](const std::optional<double>& x) { return x ? fmt_g(*x) : std::string("none"); };
  const double av = a.value_or(0), bv = b.value_or(0);
  v.verdict = av > bv ? "holds" : av < bv ? "does not hold" : "not supported";
  int crashed_a = 0, crashed_b = 0, runs_n = 0;
  for (double lr : runs.lrs()) {
    crashed_a += reach_of(runs.of(normed, lr, depth)).crashed;
    crashed_b += reach_of(runs.of(Norm::None, lr, depth)).crashed;
    runs_n += reach_of(runs.of(normed, lr, depth)).runs;
  }
  v.evidence = "largest crash-free lr: " + arm_name(normed) + " " + lr_text(a) + ", plain " + lr_text(b) +
               "; crashed runs " + std::to_string(crashed_a) + "/" + std::to_string(runs_n) + " (" + arm_name(normed) +
               ") vs " + std::to_string(crashed_b) + "/" + std::to_string(runs_n) + " (plain)";
  const double top = runs.lrs().back();
  v.evidence += "; at lr " + fmt_g(top) + ": " + arm_name(normed) + " " + reach_text(reach_of(runs.of(normed, top, depth))) +
                ", plain " + reach_text(reach_of(runs.of(Norm::None, top, depth)));
  return v;
}

Verdict deep_nets_trainable(const StudyResult& s, Norm normed, EvalPolicy pol, const Baseline& base) {
  Verdict v{arm_name(normed) + " keeps deep nets trainable", "", "not measured", "", ""};
  v.rule = "a net is trainable at a depth when every seed reaches the loss target without a crash: holds when at "
           "some depth the normalised net is and the plain net reaches it on at most half of the seeds, with no "
           "depth where the reverse is true; does not hold for the reverse; not supported otherwise";
  const Runs runs(s, "depth", pol);
  if (runs.empty()) return v;
  const double lr = runs.lrs().front();
  std::string depths;
  for (int d : runs.depths()) { if (!depths.empty()) depths += ", "; depths += std::to_string(d); }
  v.setup = "depth, " + depths + " layers, lr " + fmt_g(lr) + ", " + policy_phrase(pol);
  bool forward = false, reverse = false;
  std::string per_depth;
  for (int d : runs.depths()) {
    const Reach a = reach_of(runs.of(normed, lr, d)), b = reach_of(runs.of(Norm::None, lr, d));
    if (a.runs == 0 || b.runs == 0) continue;
    if (a.reached == a.runs && 2 * b.reached <= b.runs) forward = true;
    if (b.reached == b.runs && 2 * a.reached <= a.runs) reverse = true;
    per_depth += (per_depth.empty() ? "" : "; ") + std::to_string(d) + " layers: " + std::to_string(a.reached) + "/" +
                 std::to_string(a.runs) + " vs " + std::to_string(b.reached) + "/" + std::to_string(b.runs);
  }
  v.verdict = forward && !reverse ? "holds" : reverse && !forward ? "does not hold" : "not supported";
  v.evidence = "seeds reaching " + fmt_g(s.options.target_loss) + " (" + arm_name(normed) + " vs plain): " + per_depth;
  const int deepest = runs.depths().back();
  std::vector<double> plain_final;
  for (const auto& [seed, run] : runs.of(Norm::None, lr, deepest))
    if (!run.crashed) plain_final.push_back(run.final_train);
  if (!plain_final.empty() && base.train.n > 0)
    v.evidence += "; plain at " + std::to_string(deepest) + " layers ends at a train loss of " +
                  pm(mean_std(plain_final)) + " (constant predictor: " + pm(base.train) + ")";
  return v;
}

Verdict plain_deep_nets_crash(const StudyResult& s, EvalPolicy pol) {
  Verdict v{"plain deep nets crash", "", "not measured", "", ""};
  v.rule = "holds when any plain depth-experiment run crashes (a loss NaN, Inf or > 1e10), does not hold when none "
           "does";
  const Runs runs(s, "depth", pol);
  if (runs.empty()) return v;
  const double lr = runs.lrs().front();
  v.setup = "depth, lr " + fmt_g(lr) + (s.resolved.grad_clip && s.resolved.plain_depth_grad_clip
                                            ? ", gradients clipped"
                                            : ", plain nets without gradient clipping");
  int crashed = 0, total = 0;
  for (int d : runs.depths()) {
    const Reach b = reach_of(runs.of(Norm::None, lr, d));
    crashed += b.crashed;
    total += b.runs;
  }
  v.verdict = crashed > 0 ? "holds" : "does not hold";
  v.evidence = std::to_string(crashed) + " of " + std::to_string(total) + " plain runs crash";
  return v;
}

}  // namespace

namespace {

// Does any net generalise? The best mean final test loss of any net against the constant
// predictor's (not a claim of the chapter, but the frame every test loss is read in).
Verdict beats_constant_predictor(const StudyResult& s, EvalPolicy pol, const Baseline& base) {
  Verdict v{"some net beats the constant predictor on the test set", "every net, " + policy_phrase(pol),
            "not measured", "", ""};
  v.rule = "holds when the best net's mean final test loss is below the constant predictor's by more than the "
           "predictor's std over the seeds, does not hold when it is above its mean, not supported in between";
  std::map<std::string, std::vector<double>> finals;  // config -> final test loss per seed
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const auto& pols = s.jobs[i].run.policies;
    const auto at = std::find(pols.begin(), pols.end(), pol);
    const auto& r = s.results[i];
    if (at == pols.end() || r.crashed) continue;
    const auto& curve = r.loss[static_cast<std::size_t>(at - pols.begin())][1];
    if (!curve.empty()) finals[s.jobs[i].config].push_back(curve.back());
  }
  if (finals.empty() || base.test.n == 0) return v;
  std::string best;
  MeanStd best_m;
  for (const auto& [config, f] : finals) {
    const MeanStd m = mean_std(f);
    if (best.empty() || m.mean < best_m.mean) best = config, best_m = m;
  }
  v.verdict = best_m.mean < base.test.mean - base.test.std ? "holds"
              : best_m.mean >= base.test.mean              ? "does not hold"
                                                           : "not supported";
  v.evidence = "best final test loss " + pm(best_m) + " (" + best + "), constant predictor " + pm(base.test);
  return v;
}

}  // namespace

std::vector<Verdict> judge_claims(const StudyResult& s) {
  const Norm normed = s.options.norm;
  const EvalPolicy pol = s.resolved.policies.front();
  const Baseline base = constant_predictor(s.options);
  std::vector<Verdict> v{converges_faster(s, normed, pol), smoother(s, normed, pol),
                         larger_learning_rates(s, normed, pol), deep_nets_trainable(s, normed, pol, base),
                         plain_deep_nets_crash(s, pol)};
  if (normed == Norm::None)
    for (auto& x : v) {
      x.verdict = "not measured";
      x.evidence = "the normalised arm is plain too (--norm none)";
    }
  v.push_back(beats_constant_predictor(s, pol, base));
  return v;
}

std::string verdicts_markdown(const std::vector<Verdict>& v, const Baseline& b) {
  std::ostringstream md;
  md << "## Verdicts\n\n"
     << "The chapter's claims, judged from this run's numbers by the rules below. A seed pair is the normalised "
        "and the plain net with the same seed: the same data, initial Linear weights and batch order. A constant "
        "predictor (the train mean of y) scores a train loss of "
     << pm(b.train) << " and a test loss of " << pm(b.test) << " (mean ± std over the seeds).\n\n";
  md << "| claim | verdict | setup | evidence |\n|---|---|---|---|\n";
  for (const auto& x : v)
    md << "| " << x.claim << " | **" << x.verdict << "** | " << (x.setup.empty() ? "—" : x.setup) << " | "
       << (x.evidence.empty() ? "—" : x.evidence) << " |\n";
  md << "\nRules:\n";
  for (std::size_t i = 0; i < v.size(); ++i) md << i + 1 << ". " << v[i].claim << ": " << v[i].rule << ".\n";
  return md.str();
}

std::string verdicts_text(const std::vector<Verdict>& v) {
  std::string out;
  for (const auto& x : v) out += x.claim + ": " + x.verdict + (x.evidence.empty() ? "" : " (" + x.evidence + ")") + "\n";
  return out;
}

}  // namespace bnexp
