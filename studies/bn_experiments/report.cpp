#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include <tapegrad/core/file_io.h>
#include "kit/gnuplot.h"
#include "kit/option_checks.h"
#include "verdicts.h"

namespace bnexp {

namespace fs = std::filesystem;
using tapegrad::models::Norm;
using tapegrad::models::norm_name;

using studies::kit::fmt4;
using studies::kit::fmt9;
namespace kit = studies::kit;  // the gnuplot runner: kit::spawn_gnuplot, kit::gnuplot_text, ...

namespace {

std::string pm(const MeanStd& m) { return studies::kit::fmt_mean_std(m, {1, 4, studies::kit::Notation::General}); }

// Atomic: a regular file is replaced, a symlink written through, anything else refused.
void write_file(const fs::path& p, const std::string& text) { tapegrad::atomic_write_file(p.string(), text); }

// Index of the policy within a job's policy list, or -1.
int policy_index(const Job& j, EvalPolicy p) {
  for (std::size_t i = 0; i < j.run.policies.size(); ++i)
    if (j.run.policies[i] == p) return static_cast<int>(i);
  return -1;
}

// Jobs of one (experiment, config), in seed order.
struct Group {
  std::string experiment, config;
  std::vector<std::size_t> jobs;
};
std::vector<Group> groups_of(const StudyResult& s) {
  std::vector<Group> g;
  std::map<std::pair<std::string, std::string>, std::size_t> at;
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    auto key = std::make_pair(s.jobs[i].experiment, s.jobs[i].config);
    auto it = at.find(key);
    if (it == at.end()) {
      at.emplace(key, g.size());
      g.push_back({key.first, key.second, {i}});
    } else {
      g[it->second].jobs.push_back(i);
    }
  }
  return g;
}

}  // namespace

std::string csv_text(const StudyResult& s) {
  std::string out = std::string(kCsvHeader) + "\n";
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const Job& j = s.jobs[i];
    const RunResult& r = s.results[i];
    const std::string prefix = j.experiment + "," + j.config + "," + norm_name(j.run.norm) + "," + fmt_g(j.run.lr) +
                               "," + std::to_string(j.run.depth()) + "," + s.resolved.preset + ",";
    for (std::size_t p = 0; p < j.run.policies.size(); ++p) {
      const std::string pp = prefix + policy_name(j.run.policies[p]) + "," + std::to_string(j.run.seed) + ",";
      const auto& l = r.loss[p];
      for (std::size_t e = 0; e < l[0].size(); ++e)
        for (int sp = 0; sp < 2; ++sp)
          out += pp + std::to_string(e + 1) + (sp == 0 ? ",train," : ",test,") + fmt9(l[sp][e]) + "\n";
    }
  }
  return out;
}

std::vector<ConfigSummary> summarize(const StudyResult& s) {
  std::vector<ConfigSummary> out;
  for (const auto& g : groups_of(s)) {
    const Job& j0 = s.jobs[g.jobs.front()];
    for (EvalPolicy pol : s.resolved.policies) {
      ConfigSummary c;
      c.experiment = g.experiment;
      c.config = g.config;
      c.norm = j0.run.norm;
      c.lr = j0.run.lr;
      c.depth = j0.run.depth();
      c.policy = pol;
      std::vector<double> tr, te, best, reach;
      double rise = 0;
      for (auto i : g.jobs) {
        const int p = policy_index(s.jobs[i], pol);
        if (p < 0) continue;
        const RunResult& r = s.results[i];
        ++c.runs;
        if (r.crashed) {
          ++c.crashed;
          continue;
        }
        const auto& l = r.loss[p];
        if (l[0].empty()) continue;
        tr.push_back(l[0].back());
        te.push_back(l[1].back());
        best.push_back(*std::min_element(l[1].begin(), l[1].end()));
        if (int e = epochs_to_reach(l[0], s.options.target_loss); e > 0) reach.push_back(e);
        rise += rise_fraction(l[0]);
      }
      c.final_train = mean_std(tr);
      c.final_test = mean_std(te);
      c.best_test = mean_std(best);
      c.epochs_to_target = mean_std(reach);
      c.reached_target = static_cast<int>(reach.size());
      c.rise_fraction = tr.empty() ? 0.0 : rise / static_cast<double>(tr.size());
      out.push_back(c);
    }
  }
  return out;
}

std::string summary_markdown(const StudyResult& s) {
  const auto& o = s.options;
  const auto& r = s.resolved;
  std::ostringstream md;
  md << "# Batch-normalisation experiments: summary\n\n";
  md << "- preset: **" << r.preset << "**; gradient clip: "
     << (r.grad_clip ? "elementwise at " + fmt_g(*r.grad_clip) +
                           (r.plain_depth_grad_clip ? "" : " (not for the plain depth nets)")
                     : std::string("none"))
     << "; activation clip: " << (r.act_clip ? "[-" + fmt_g(*r.act_clip) + ", " + fmt_g(*r.act_clip) + "]" : "none")
     << "\n";
  md << "- BN momentum " << fmt_g(o.bn_momentum) << " (PyTorch convention) = decay "
     << fmt_g(1.0 - o.bn_momentum) << " (Keras/textbook convention)\n";
  md << "- seeds " << o.seed << ".." << (o.seed + static_cast<std::uint64_t>(o.seeds) - 1) << " (" << o.seeds
     << " per configuration), " << o.epochs << " epochs, batch " << o.batch
     << ", plain SGD on MSE; data: 200 train / 100 test, 50 features, y = sin(2·x0) + cos(x1) + 0.1·ε\n";
  md << "- Losses are mean ± sample std over the runs that did not crash. A run crashes when a loss becomes "
        "NaN, Inf or > 1e10; training stops there.\n";
  md << "- Evaluation policy *eval*: model.eval(), running statistics, as PyTorch practice evaluates. *train*: the "
        "chapter's train-mode evaluation, which normalises with the batch statistics of the whole evaluated set. "
        "Both policies see the same training; only the reported losses differ. Train-mode evaluation reaches the "
        "loss target sooner because it normalises with the current weights' statistics, while the running "
        "statistics of eval mode trail the weights: with momentum "
     << fmt_g(o.bn_momentum) << " they average over about " << fmt_g(o.bn_momentum > 0 ? 1.0 / o.bn_momentum : 0)
     << " steps.\n";
  md << "- `epochs to ≤" << fmt_g(o.target_loss) << "`: first epoch whose full-train-set loss is ≤ "
     << fmt_g(o.target_loss) << " (runs that reached it / runs); `rising`: fraction of epochs whose train loss "
        "went up (0 = smooth descent).\n";
  const Baseline base = constant_predictor(o);
  md << "- `constant predictor`: the train mean of y, a net that has learnt nothing; a test loss at or above its "
        "test loss does not generalise.\n";
  md << "\n" << verdicts_markdown(judge_claims(s), base);
  const auto sums = summarize(s);
  for (const auto& exp : experiment_names()) {
    for (EvalPolicy pol : r.policies) {
      std::vector<const ConfigSummary*> rows;
      for (const auto& c : sums)
        if (c.experiment == exp && c.policy == pol) rows.push_back(&c);
      if (rows.empty()) continue;
      md << "\n## " << exp << " — evaluation policy: " << policy_name(pol) << "\n\n";
      md << "| config | norm | lr | depth | final train | final test | best test | epochs to ≤" << fmt_g(o.target_loss)
         << " | rising | crashed |\n";
      md << "|---|---|---|---|---|---|---|---|---|---|\n";
      for (const auto* c : rows) {
        std::string crashed = std::to_string(c->crashed) + "/" + std::to_string(c->runs);
        if (c->crashed > 0) crashed = "**" + crashed + " CRASHED**";
        md << "| " << c->config << " | " << norm_name(c->norm) << " | " << fmt_g(c->lr) << " | " << c->depth << " | "
           << pm(c->final_train) << " | " << pm(c->final_test) << " | " << pm(c->best_test) << " | "
           << (c->reached_target ? pm(c->epochs_to_target) : std::string("never")) << " ("
           << c->reached_target << "/" << (c->runs - c->crashed) << ") | " << fmt4(c->rise_fraction) << " | "
           << crashed << " |\n";
      }
      md << "| constant predictor | — | — | — | " << pm(base.train) << " | " << pm(base.test)
         << " | — | — | — | — |\n";
    }
  }
  return md.str();
}

namespace {

// y tics of a log axis over [lo, hi]: powers of ten when the range spans at least three of
// them, otherwise 1-2-5 steps, so that a narrow range (e.g. test losses 0.3 to 6) still
// gets several labelled tics.
std::string log_ytics(double lo, double hi) {
  std::vector<double> tics;
  for (const double step : {1.0, 2.0, 5.0})
    for (int e = static_cast<int>(std::floor(std::log10(lo))) - 1; e <= static_cast<int>(std::ceil(std::log10(hi))); ++e) {
      const double v = step * std::pow(10.0, e);
      if (v >= lo && v <= hi && (step == 1.0 || std::log10(hi / lo) < 3)) tics.push_back(v);
    }
  std::sort(tics.begin(), tics.end());
  if (tics.size() < 2) return "set format y '%.0e'\n";
  std::string out = "set ytics (";
  for (std::size_t i = 0; i < tics.size(); ++i) out += (i ? ", " : "") + std::string("'") + fmt4(tics[i]) + "' " + fmt9(tics[i]);
  return out + ")\n";
}

struct Plotter {
  const StudyResult& s;
  fs::path dir, plots;
  std::vector<std::string> pngs;

  // Band data of one (experiment, config, policy, split) over the runs that did not crash:
  // epoch, geometric mean, and the ±1 std band of log10(loss); "?" where no run is left.
  std::string band_file(const Group& g, EvalPolicy pol, int split) {
    std::vector<const std::vector<double>*> curves;
    std::vector<bool> crashed;
    for (auto i : g.jobs) {
      const int p = policy_index(s.jobs[i], pol);
      if (p < 0) continue;
      curves.push_back(&s.results[i].loss[p][split]);
      crashed.push_back(s.results[i].crashed);
    }
    const Band b = log10_band(curves, crashed, true);
    std::ostringstream d;
    d << "# epoch geomean lo hi n (" << g.experiment << " " << g.config << " " << policy_name(pol) << " "
      << (split == 0 ? "train" : "test") << "; band = 10^(mean ± std of log10 loss))\n";
    for (std::size_t e = 0; e < b.mean.size(); ++e) {
      if (b.count[e] == 0) {
        d << e + 1 << " ? ? ? 0\n";
        continue;
      }
      d << e + 1 << " " << fmt9(std::pow(10.0, b.mean[e])) << " " << fmt9(std::pow(10.0, b.mean[e] - b.std[e]))
        << " " << fmt9(std::pow(10.0, b.mean[e] + b.std[e])) << " " << b.count[e] << "\n";
    }
    const std::string name =
        g.experiment + "_" + g.config + "_" + policy_name(pol) + (split == 0 ? "_train" : "_test") + ".dat";
    write_file(plots / name, d.str());
    return "plots/" + name;  // scripts run in `dir` and name files relative to it
  }

  static std::string color(Norm n) {
    switch (n) {
      case Norm::Batch: return "#1f77b4";
      case Norm::Layer: return "#2ca02c";
      case Norm::Group: return "#9467bd";
      case Norm::None: return "#d62728";
    }
    return "black";
  }

  int crashed_in(const Group& g) const {
    int c = 0;
    for (auto i : g.jobs) c += s.results[i].crashed ? 1 : 0;
    return c;
  }

  // One panel: train (solid) and test (dashed) curves with ±1 std bands for each group.
  std::string panel(const std::vector<const Group*>& gs, EvalPolicy pol, const std::string& title) {
    std::ostringstream gp;
    gp << "set title " << kit::gnuplot_text(title) << "\nset logscale y\nset yrange [*:*]\nset format y '%.0e'\n"
       << "set xlabel 'epoch'\nset ylabel 'MSE loss'\nset grid\n"
       // Inside, bottom left (where every loss curve has long left): the panels keep their width.
       << "set key inside left bottom Left reverse opaque box samplen 2 font ',9'\n";
    gp << "plot ";
    bool first = true;
    for (const auto* g : gs) {
      const Job& j = s.jobs[g->jobs.front()];
      const std::string c = color(j.run.norm);
      const int crashed = crashed_in(*g);
      const std::string name = norm_name(j.run.norm) == "none" ? "plain" : norm_name(j.run.norm) + " norm";
      const std::string tag = crashed ? " (" + std::to_string(crashed) + "/" + std::to_string(g->jobs.size()) +
                                            " crashed, not shown)"
                                      : "";
      for (int sp = 0; sp < 2; ++sp) {
        const std::string f = band_file(*g, pol, sp);
        if (!first) gp << ", \\\n     ";
        first = false;
        gp << kit::gnuplot_quote(f) << " using 1:3:4 with filledcurves fc rgb '" << c
           << "' fs transparent solid 0.18 noborder notitle"
           << ", \\\n     " << kit::gnuplot_quote(f) << " using 1:2 with lines lw 2 dt " << (sp == 0 ? 1 : 2)
           << " lc rgb '" << c << "' title "
           << kit::gnuplot_text(name + (sp == 0 ? " train" : " test") + (sp == 0 ? tag : ""));
      }
    }
    gp << baseline_line(1, first) << "\n";
    return gp.str();
  }

  std::vector<std::string> queued;  // figure names whose scripts are written, not yet drawn
  Baseline base{};  // the constant predictor, drawn as a dotted line in every figure

  // ", <loss> with lines ... title 'constant predictor, <split> <loss>'", or "" without seeds
  std::string baseline_line(int split, bool first) const {
    const MeanStd& m = split == 0 ? base.train : base.test;
    if (m.n == 0) return "";
    return std::string(first ? "" : ", \\\n     ") + fmt9(m.mean) + " with lines dt 3 lw 1.5 lc rgb '#555555' title " +
           kit::gnuplot_text("constant predictor, " + std::string(split == 0 ? "train " : "test ") + fmt4(m.mean));
  }

  void run_script(const std::string& base, const std::string& body) {
    write_file(plots / (base + ".gp"), "set datafile missing '?'\n" + body);
    queued.push_back(base);
  }

  // Draws the queued figures with two gnuplot processes at the same time (figures dealt
  // alternately; a process's start-up is most of a figure's cost, and gnuplot is
  // single-threaded), and keeps the PNGs that were written.
  void draw_all() {
    constexpr std::size_t kProcesses = 2;
    std::vector<std::pair<pid_t, std::vector<std::string>>> running;
    for (std::size_t w = 0; w < std::min(kProcesses, queued.size()); ++w) {
      std::vector<std::string> bases, scripts;
      for (std::size_t i = w; i < queued.size(); i += kProcesses) {
        bases.push_back(queued[i]);
        std::error_code ec;
        fs::remove(dir / (queued[i] + ".png"), ec);  // a stale figure must not pass for a new one
        scripts.push_back("plots/" + queued[i] + ".gp");
      }
      // No shell: an argv, run in the output folder; the scripts name files relative to it.
      const fs::path log = plots / ("gnuplot" + std::to_string(w) + ".log");
      std::error_code ec;
      fs::remove(log, ec);
      const pid_t pid = kit::spawn_gnuplot(dir.string(), scripts, log.string());
      if (pid < 0) {
        spdlog::warn("cannot start gnuplot; the CSV is unaffected");
        continue;
      }
      running.emplace_back(pid, std::move(bases));
    }
    for (std::size_t w = 0; w < running.size(); ++w) {
      kit::wait_ok(running[w].first);
      for (const auto& base : running[w].second) {
        if (!fs::exists(dir / (base + ".png"))) {
          spdlog::warn("gnuplot failed on {} (see {}); the CSV is unaffected", (plots / (base + ".gp")).string(),
                       (plots / ("gnuplot" + std::to_string(w) + ".log")).string());
          continue;
        }
        pngs.push_back((dir / (base + ".png")).string());
      }
    }
    queued.clear();
  }

  void curves_figure(const std::string& exp, EvalPolicy pol, const std::vector<Group>& all) {
    std::vector<const Group*> gs;
    for (const auto& g : all)
      if (g.experiment == exp) gs.push_back(&g);
    if (gs.empty()) return;
    // One panel per learning rate.
    std::vector<double> lrs;
    for (const auto* g : gs) {
      const double lr = s.jobs[g->jobs.front()].run.lr;
      if (std::find(lrs.begin(), lrs.end(), lr) == lrs.end()) lrs.push_back(lr);
    }
    const std::string base = exp + "_" + policy_name(pol);
    const int cols = std::min<int>(static_cast<int>(lrs.size()), 2);
    const int rows = (static_cast<int>(lrs.size()) + cols - 1) / cols;
    std::ostringstream gp;
    gp << "set terminal pngcairo size " << 720 * cols + 80 << "," << 440 * rows + 40 << " font 'sans,10'\n"
       << "set output " << kit::gnuplot_quote(base + ".png") << "\n";
    if (lrs.size() > 1)
      gp << "set multiplot layout " << rows << "," << cols << " title "
         << kit::gnuplot_text(exp + " (" + s.resolved.preset + " preset, " + policy_name(pol) +
                         "-mode evaluation; line: geometric mean over seeds, band: ±1 std of log10 loss)")
         << "\n";
    for (double lr : lrs) {
      std::vector<const Group*> sel;
      for (const auto* g : gs)
        if (s.jobs[g->jobs.front()].run.lr == lr) sel.push_back(g);
      std::string title = "lr " + fmt_g(lr);
      if (lrs.size() == 1)
        title = exp + ", lr " + fmt_g(lr) + " (" + s.resolved.preset + " preset, " + policy_name(pol) +
                "-mode evaluation)\nline: geometric mean over seeds, band: ±1 std of log10 loss";
      gp << panel(sel, pol, title);
    }
    if (lrs.size() > 1) gp << "unset multiplot\n";
    run_script(base, gp.str());
  }

  // Final loss by depth (one panel per split): mean ± 1 std over the runs that did not
  // crash, one dot per seed, and a × with "k/K crashed" above each config with crashes.
  void depth_figure(EvalPolicy pol, const std::vector<Group>& all) {
    std::vector<const Group*> gs;
    for (const auto& g : all)
      if (g.experiment == "depth") gs.push_back(&g);
    if (gs.empty()) return;
    const std::string base = std::string("depth_") + policy_name(pol);
    std::ostringstream gp;
    gp << "set terminal pngcairo size 1280,520 font 'sans,10'\nset output " << kit::gnuplot_quote(base + ".png") << "\n"
       << "set multiplot layout 1,2 title "
       << kit::gnuplot_text("depth, lr " + fmt_g(s.jobs[gs.front()->jobs.front()].run.lr) + " (" + s.resolved.preset +
                       " preset, " + policy_name(pol) +
                       "-mode evaluation): mean ± 1 std over seeds that did not crash, dots = seeds, × = crashed runs")
       << "\n";
    for (int split = 0; split < 2; ++split) {
      const std::string sp = split == 0 ? "train" : "test";
      std::map<Norm, std::ostringstream> means, points, crashes;
      double ymin = 1e300, ymax = 0;
      for (const auto* g : gs)
        for (auto i : g->jobs) {
          const int p = policy_index(s.jobs[i], pol);
          if (p < 0 || s.results[i].crashed || s.results[i].loss[p][split].empty()) continue;
          const double v = s.results[i].loss[p][split].back();
          if (v > 0) ymin = std::min(ymin, v);
          ymax = std::max(ymax, v);
        }
      if (ymax <= 0 || ymin > ymax) ymin = 0.1, ymax = 1;
      if (const MeanStd& b = split == 0 ? this->base.train : this->base.test; b.n > 0) ymax = std::max(ymax, b.mean);
      const double top = ymax * 8, floor = ymin / 2;
      for (const auto* g : gs) {
        const Job& j = s.jobs[g->jobs.front()];
        const double off = j.run.norm == Norm::None ? 0.25 : -0.25;
        std::vector<double> v;
        int crashed = 0;
        for (auto i : g->jobs) {
          const int p = policy_index(s.jobs[i], pol);
          if (p < 0) continue;
          if (s.results[i].crashed) {
            ++crashed;
            continue;
          }
          if (s.results[i].loss[p][split].empty()) continue;
          v.push_back(s.results[i].loss[p][split].back());
          points[j.run.norm] << j.run.depth() + off << " " << fmt9(v.back()) << "\n";
        }
        const MeanStd m = mean_std(v);
        if (m.n > 0)
          means[j.run.norm] << j.run.depth() + off << " " << fmt9(m.mean) << " "
                            << fmt9(std::max(m.mean - m.std, floor)) << " " << fmt9(m.mean + m.std) << "\n";
        if (crashed > 0)
          crashes[j.run.norm] << j.run.depth() + off << " " << fmt9(top / 2.5) << " \"" << crashed << "/"
                              << g->jobs.size() << " crashed\"\n";
      }
      gp << "set title 'final " << sp << " loss'\nset logscale y\nset yrange [" << fmt9(floor) << ":"
         << fmt9(top) << "]\n" << log_ytics(floor, top)
         << "set xrange [3:17]\nset xtics (5, 10, 15)\nset xlabel 'Linear layers'\nset ylabel 'final " << sp
         << " MSE'\nset grid\nset key top left\n";
      gp << "plot ";
      bool first = true;
      for (auto norm : {Norm::Batch, Norm::Layer, Norm::Group, Norm::None}) {
        if (!means.count(norm) && !crashes.count(norm)) continue;
        const std::string name = norm == Norm::None ? "plain" : norm_name(norm) + " norm";
        const std::string c = color(norm);
        auto add = [&](const std::string& file, const std::string& text, const std::string& style) {
          write_file(plots / file, text.empty() ? "? ? ? ?\n" : text);
          if (!first) gp << ", \\\n     ";
          first = false;
          gp << kit::gnuplot_quote("plots/" + file) << " " << style;
        };
        const std::string stem = "depth_" + norm_name(norm) + "_" + policy_name(pol) + "_" + sp;
        add(stem + "_mean.dat", means[norm].str(),
            "using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 1.2 lc rgb '" + c + "' title " + kit::gnuplot_text(name));
        add(stem + "_seeds.dat", points[norm].str(), "using 1:2 with points pt 6 ps 0.8 lc rgb '" + c + "' notitle");
        if (crashes.count(norm)) {
          add(stem + "_crashed.dat", crashes[norm].str(),
              "using 1:2 with points pt 2 ps 2.5 lw 2 lc rgb '" + c + "' title " + kit::gnuplot_text(name + " crashed"));
          gp << ", \\\n     " << kit::gnuplot_quote("plots/" + stem + "_crashed.dat")
             << " using 1:2:3 with labels noenhanced offset 0,1.2 tc rgb '" << c << "' notitle";
        }
      }
      gp << baseline_line(split, first) << "\n";
    }
    gp << "unset multiplot\n";
    run_script(base, gp.str());
  }
};

}  // namespace

std::vector<std::string> write_outputs(const StudyResult& s, const std::string& dir_s) {
  const fs::path dir(dir_s);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir.string() + ": " + ec.message());
  write_file(dir / "results.csv", csv_text(s));
  write_file(dir / "summary.md", summary_markdown(s));
  if (!kit::gnuplot_available()) {
    static bool warned = false;
    if (!warned) spdlog::warn("gnuplot (with the pngcairo terminal) not found: no figures, the CSV and summary are written");
    warned = true;
    return {};
  }
  Plotter p{s, dir, dir / "plots", {}, {}, constant_predictor(s.options)};
  fs::create_directories(p.plots, ec);
  if (ec) throw std::runtime_error("cannot create " + p.plots.string() + ": " + ec.message());
  const auto gs = groups_of(s);
  for (EvalPolicy pol : s.resolved.policies) {
    p.curves_figure("convergence", pol, gs);
    p.curves_figure("learning-rate", pol, gs);
    p.depth_figure(pol, gs);
  }
  p.draw_all();
  return p.pngs;
}

}  // namespace bnexp
