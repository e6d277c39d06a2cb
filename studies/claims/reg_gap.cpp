#include "reg_gap.h"

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

GapOptions quick_gap_options(GapOptions o) {
  o = studies::kit::with_quick_size(o, {.seeds = 1, .epochs = 2, .train_size = 1024, .test_size = 1000});
  o.batches = {32, 128};
  o.lrs = {0.03};
  o.matched_lr = 0.03;
  return o;
}

void check_gap_options(const GapOptions& o) {
  if (o.batches.empty()) throw std::invalid_argument("--batches: expected at least one batch size, got none");
  for (auto b : o.batches) {
    if (b < 2) throw std::invalid_argument("--batches: expected sizes >= 2 (BatchNorm refuses 1), got " + std::to_string(b));
    if (b > o.train_size)
      throw std::invalid_argument("--batches: " + std::to_string(b) + " exceeds --train-size " + std::to_string(o.train_size));
  }
  if (o.lrs.empty()) throw std::invalid_argument("--lrs: expected at least one rate, got none");
  bool has = false;
  for (double lr : o.lrs) {
    if (!(lr > 0 && std::isfinite(lr))) throw std::invalid_argument("--lrs: expected finite rates > 0, got " + fmt9(lr));
    has = has || lr == o.matched_lr;
  }
  if (!has) throw std::invalid_argument("--matched-lr: expected one of --lrs, got " + fmt9(o.matched_lr));
  studies::kit::check_training_options(o);
}

namespace {

std::vector<const GapRun*> cell(const GapResult& r, bool bn, std::int64_t batch, double lr) {
  std::vector<const GapRun*> out;
  for (const auto& x : r.runs)
    if (x.bn == bn && x.batch == batch && x.lr == lr) out.push_back(&x);
  return out;
}
double mean_test(const std::vector<const GapRun*>& c) {
  double s = 0;
  for (auto* x : c) s += x->out.crashed ? 0.1 : x->out.test_acc;
  return s / static_cast<double>(c.size());
}
double best_lr(const GapResult& r, bool bn, std::int64_t batch) {
  double best = -1, at = r.options.lrs.front();
  for (double lr : r.options.lrs) {
    const double m = mean_test(cell(r, bn, batch, lr));
    if (m > best) best = m, at = lr;
  }
  return at;
}
std::string pm(const MeanStd& m, double scale = 100, int digits = 2) {
  return studies::kit::fmt_mean_std(m, {scale, digits});
}
struct Stats {
  MeanStd train, test, gap;
  int crashed = 0;
};
Stats stats(const std::vector<const GapRun*>& c) {
  std::vector<double> tr, te, g;
  Stats s;
  for (auto* x : c) {
    if (x->out.crashed) { ++s.crashed; continue; }
    tr.push_back(x->out.train_acc), te.push_back(x->out.test_acc), g.push_back(x->gap());
  }
  s.train = mean_std(tr), s.test = mean_std(te), s.gap = mean_std(g);
  return s;
}
// Paired bn − plain gap differences, by seed.
MeanStd paired_gap(const std::vector<const GapRun*>& b, const std::vector<const GapRun*>& p) {
  std::vector<double> d;
  for (auto* x : b)
    for (auto* y : p)
      if (x->seed == y->seed && !x->out.crashed && !y->out.crashed) d.push_back(x->gap() - y->gap());
  return mean_std(d);
}

}  // namespace

GapResult run_reg_gap(const GapOptions& o, const studies::kit::StudyData& d) {
  check_gap_options(o);
  GapResult r;
  r.options = o;
  for (bool bn : {false, true})
    for (auto b : o.batches)
      for (double lr : o.lrs) {
        GapRun x;
        x.bn = bn, x.batch = b, x.lr = lr;
        studies::kit::add_seed_runs(r.runs, x, o);
      }
  r.seconds = studies::kit::run_grid(r.runs, o.threads, [&](auto& x) {
    MlpSpec spec;
    spec.hidden = o.hidden;
    spec.bn = x.bn;
    Generator init(x.seed);
    Mlp m = build_mlp(spec, d.train.num_features(), 10, init);
    const TrainSpec t{.epochs = o.epochs, .batch = x.batch, .lr = x.lr, .shuffle_seed = x.seed + 1000003};
    x.out = train_mlp(m, t, d);
    for (const auto& b : m.bns) {
      const auto g = b->weight.to_vector();
      double s = 0;
      for (double v : g) s += std::fabs(v);
      x.gamma_abs.push_back(s / static_cast<double>(g.size()));
    }
    spdlog::info("reg-gap {} batch {} lr {} seed {}: {}", x.bn ? "bn" : "plain", x.batch, fmt4(x.lr), x.seed,
                 x.out.crashed ? std::string("crashed")
                               : "train " + fmt4(100 * x.out.train_acc) + "%, test " + fmt4(100 * x.out.test_acc) + "%");
  });
  return r;
}

std::string gap_csv(const GapResult& r) {
  std::string out = "net,batch,lr,seed,crashed,last_epoch_loss,train_acc,test_acc,gap,gamma_abs\n";
  for (const auto& x : r.runs) {
    std::string g;
    for (std::size_t i = 0; i < x.gamma_abs.size(); ++i) {
      if (i) g += ';';
      g += fmt9(x.gamma_abs[i]);
    }
    out += std::string(x.bn ? "bn" : "plain") + "," + std::to_string(x.batch) + "," + fmt9(x.lr) + "," +
           std::to_string(x.seed) + "," + (x.out.crashed ? "1" : "0") + "," + fmt9(x.out.last_epoch_loss) + "," +
           fmt9(x.out.train_acc) + "," + fmt9(x.out.test_acc) + "," + fmt9(x.gap()) + "," + g + "\n";
  }
  return out;
}

std::string gap_summary(const GapResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims reg-gap: summary\n\n";
  md << "- Fashion-MNIST MLP " << studies::kit::mlp_layers(o.hidden)
     << ", bn: Linear -> BatchNorm1d -> ReLU, plain: Linear -> ReLU; " << o.train_size << " training images, "
     << o.epochs << " epochs, SGD momentum 0.9, lr ∈ {";
  for (std::size_t k = 0; k < o.lrs.size(); ++k) md << (k ? ", " : "") << fmt4(o.lrs[k]);
  md << "}; gap = train − test accuracy, both eval mode, in points\n";
  md << "- seeds " << studies::kit::seed_range(o) << "; wall time " << fmt4(r.seconds)
     << " s with " << o.threads << " worker threads\n\n";
  for (int pass = 0; pass < 2; ++pass) {
    md << (pass == 0 ? "## At the matched lr " + fmt4(o.matched_lr) : std::string("## At each net's best lr (by mean test accuracy)"))
       << "\n\n| batch | net | lr | train acc (%) | test acc (%) | gap (points) | bn − plain gap, paired (points) |\n"
          "|---|---|---|---|---|---|---|\n";
    for (auto b : o.batches) {
      const double lp = pass == 0 ? o.matched_lr : best_lr(r, false, b), lb = pass == 0 ? o.matched_lr : best_lr(r, true, b);
      const auto cp = cell(r, false, b, lp), cb = cell(r, true, b, lb);
      for (bool bn : {false, true}) {
        const Stats s = stats(bn ? cb : cp);
        md << "| " << b << " | " << (bn ? "bn" : "plain") << " | " << fmt4(bn ? lb : lp) << " | " << pm(s.train) << " | "
           << pm(s.test) << " | " << pm(s.gap) << (s.crashed ? " (" + std::to_string(s.crashed) + " crashed)" : "") << " | "
           << (bn ? pm(paired_gap(cb, cp)) : "") << " |\n";
      }
    }
    md << "\n";
  }
  md << "## Mean |γ| per BN layer after training (matched lr)\n\n| batch | bn1 | bn2 |\n|---|---|---|\n";
  for (auto b : o.batches) {
    md << "| " << b << " |";
    for (std::size_t l = 0; l < o.hidden.size() && l < 2; ++l) {
      std::vector<double> v;
      for (auto* x : cell(r, true, b, o.matched_lr))
        if (l < x->gamma_abs.size()) v.push_back(x->gamma_abs[l]);
      md << " " << pm(mean_std(v), 1, 4) << " |";
    }
    md << "\n";
  }
  return md.str();
}

std::vector<std::string> write_gap(const GapResult& r, const std::string& dir_s) {
  const auto& o = r.options;
  if (!studies::kit::write_tables(dir_s, gap_csv(r), gap_summary(r))) return {};
  using studies::kit::gnuplot_text;
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1000,480 font 'sans,10'\nset output 'reg_gap.png'\nset multiplot layout 1,2 title "
     << gnuplot_text("Fashion-MNIST MLP, " + std::to_string(o.train_size) + " images, " + std::to_string(o.epochs) +
                     " epochs: train - test accuracy (mean ± std over " + std::to_string(o.seeds) + " seeds)")
     << "\nset xlabel 'batch size'\nset ylabel 'gap (points)'\nset logscale x 2\nset grid\nset key top left\n";
  for (int pass = 0; pass < 2; ++pass) {
    gp << "set title " << gnuplot_text(pass == 0 ? "matched lr " + fmt4(o.matched_lr) : "each net at its best lr")
       << "\nplot ";
    for (bool bn : {false, true}) {
      std::ostringstream dat;
      for (auto b : o.batches) {
        const double lr = pass == 0 ? o.matched_lr : best_lr(r, bn, b);
        const Stats s = stats(cell(r, bn, b, lr));
        if (s.gap.n) dat << b << " " << fmt9(100 * s.gap.mean) << " " << fmt9(100 * s.gap.std) << "\n";
      }
      const std::string f =
          studies::kit::data_file(dir_s, "gap_" + std::to_string(pass) + (bn ? "_bn" : "_plain") + ".dat", dat.str());
      gp << (bn ? ", " : "") << f << " using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '" << (bn ? "#d62728" : "#1f77b4")
         << "' title " << gnuplot_text(bn ? "BN" : "plain");
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  return studies::kit::render_figure(dir_s, "reg_gap", gp.str());
}

}  // namespace claims
