#include "init_sweep.h"

#include <algorithm>
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

InitOptions quick_init_options(InitOptions o) {
  o = studies::kit::with_quick_size(o, {.seeds = 1, .epochs = 1, .train_size = 1024, .test_size = 1000});
  o.scales = {0.1, 1, 10};
  o.depths = {2, 4};
  return o;
}

void check_init_options(const InitOptions& o) {
  if (o.scales.empty()) throw std::invalid_argument("--scales: expected at least one scale, got none");
  for (double s : o.scales)
    if (!(s > 0 && std::isfinite(s))) throw std::invalid_argument("--scales: expected finite scales > 0, got " + fmt9(s));
  if (o.depths.empty()) throw std::invalid_argument("--depths: expected at least one depth, got none");
  for (int dd : o.depths)
    if (dd < 1 || dd > 10000)
      throw std::invalid_argument("--depths: expected hidden-layer counts from 1 to 10000, got " + std::to_string(dd));
  studies::kit::check_at_least("--width", o.width, 1);
  if (!(o.tolerance >= 0 && std::isfinite(o.tolerance)))
    throw std::invalid_argument("--tolerance: expected points >= 0, got " + fmt9(o.tolerance));
  studies::kit::check_training_options(o);
}

double InitRun::acc() const { return out.crashed ? crash_acc : out.test_acc; }

namespace {

// Mean test accuracy per cell (depth-major, then scale) of one net over the given seeds
// (all when seed_filter < 0).
std::vector<double> cell_means(const InitResult& r, bool bn, long long seed_filter = -1) {
  const auto& o = r.options;
  std::vector<double> out;
  for (int dd : o.depths)
    for (double s : o.scales) {
      std::vector<double> a;
      for (const auto& x : r.runs)
        if (x.bn == bn && x.depth == dd && x.scale == s && (seed_filter < 0 || x.seed == static_cast<std::uint64_t>(seed_filter)))
          a.push_back(x.acc());
      out.push_back(mean_std(a).mean);
    }
  return out;
}
// Share of cells within tolerance (points) of the best cell.
double good_share(const std::vector<double>& cells, double tol, std::vector<bool>* mask = nullptr) {
  const double best = *std::max_element(cells.begin(), cells.end());
  int n = 0;
  if (mask) mask->assign(cells.size(), false);
  for (std::size_t k = 0; k < cells.size(); ++k)
    if (100 * (best - cells[k]) <= tol + 1e-9) {
      ++n;
      if (mask) (*mask)[k] = true;
    }
  return static_cast<double>(n) / static_cast<double>(cells.size());
}

}  // namespace

InitResult run_init_sweep(const InitOptions& o, const studies::kit::StudyData& d) {
  check_init_options(o);
  InitResult r;
  r.options = o;
  for (bool bn : {false, true})
    for (int dd : o.depths)
      for (double s : o.scales) {
        InitRun x;
        x.bn = bn, x.depth = dd, x.scale = s;
        studies::kit::add_seed_runs(r.runs, x, o);
      }
  r.seconds = studies::kit::run_grid(r.runs, o.threads, [&](auto& x) {
    MlpSpec spec;
    spec.hidden.assign(static_cast<std::size_t>(x.depth), o.width);
    spec.hidden_option = "--width " + std::to_string(o.width) + " (--depths " + std::to_string(x.depth) + ")";
    spec.bn = x.bn;
    spec.weight_scale = x.scale;
    Generator init(x.seed);
    Mlp m = build_mlp(spec, d.train.num_features(), 10, init);
    const TrainSpec t{.epochs = o.epochs, .batch = o.batch, .lr = o.lr, .shuffle_seed = x.seed + 1000003};
    x.out = train_mlp(m, t, d);
    spdlog::info("init-sweep {} depth {} scale {} seed {}: {}", x.bn ? "bn" : "plain", x.depth, fmt4(x.scale), x.seed,
                 x.out.crashed ? std::string("crashed") : "test " + fmt4(100 * x.out.test_acc) + "%");
  });
  return r;
}

std::string init_csv(const InitResult& r) {
  std::string out = "net,depth,scale,seed,crashed,last_epoch_loss,train_acc,test_acc\n";
  for (const auto& x : r.runs)
    out += std::string(x.bn ? "bn" : "plain") + "," + std::to_string(x.depth) + "," + fmt9(x.scale) + "," +
           std::to_string(x.seed) + "," + (x.out.crashed ? "1" : "0") + "," + fmt9(x.out.last_epoch_loss) + "," +
           fmt9(x.out.train_acc) + "," + fmt9(x.out.test_acc) + "\n";
  return out;
}

std::string init_summary(const InitResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims init-sweep: summary\n\n";
  if (!r.description.empty()) {
    md << r.description;
  } else {
  md << "- Fashion-MNIST MLP 784-[" << o.width << " × depth]-10, bn: Linear -> BatchNorm1d -> ReLU, plain: Linear -> ReLU; "
        "weights N(0, (s·√(2/fan_in))²), bias 0\n";
  md << "- " << o.train_size << " training images, SGD momentum 0.9, lr " << fmt4(o.lr) << " (fixed), batch " << o.batch
     << ", " << o.epochs << " epochs; eval-mode test accuracy; a crashed run counts as 10 %\n";
  }
  md << "- seeds " << studies::kit::seed_range(o) << "; wall time " << fmt4(r.seconds)
     << " s with " << o.threads << " worker threads\n\n";
  for (bool bn : {false, true}) {
    const auto cells = cell_means(r, bn);
    std::vector<bool> mask;
    good_share(cells, o.tolerance, &mask);
    md << "### " << (bn ? "BN" : "plain") << ": mean " << r.score << " (%); * = within " << fmt4(o.tolerance)
       << " points of the best\n\n| depth \\ s |";
    for (double s : o.scales) md << " " << fmt4(s) << " |";
    md << "\n|---|";
    for (std::size_t k = 0; k < o.scales.size(); ++k) md << "---|";
    md << "\n";
    std::size_t c = 0;
    for (int dd : o.depths) {
      md << "| " << dd << " |";
      for (std::size_t k = 0; k < o.scales.size(); ++k, ++c) {
        int crashed = 0;
        for (const auto& x : r.runs)
          if (x.bn == bn && x.depth == dd && x.scale == o.scales[k]) crashed += x.out.crashed;
        char buf[64];
        std::snprintf(buf, sizeof buf, " %.1f%s%s |", 100 * cells[c], mask[c] ? "*" : "",
                      crashed ? (" (" + std::to_string(crashed) + " crashed)").c_str() : "");
        md << buf;
      }
      md << "\n";
    }
    md << "\n";
  }
  md << "| net | best cell (%) | share of the grid within " << fmt4(o.tolerance)
     << " points of the best (seed means) | the same per seed, mean ± std |\n|---|---|---|---|\n";
  std::vector<double> per[2];
  for (bool bn : {false, true}) {
    for (int k = 0; k < o.seeds; ++k)
      per[bn].push_back(good_share(cell_means(r, bn, static_cast<long long>(o.seed) + k), o.tolerance));
    const auto cells = cell_means(r, bn);
    const MeanStd m = mean_std(per[bn]);
    char buf[160];
    std::snprintf(buf, sizeof buf, "| %s | %.2f | %.3f (%d of %zu cells) | %.3f ± %.3f |\n", bn ? "bn" : "plain",
                  100 * *std::max_element(cells.begin(), cells.end()), good_share(cells, o.tolerance),
                  static_cast<int>(std::lround(good_share(cells, o.tolerance) * cells.size())), cells.size(), m.mean, m.std);
    md << buf;
  }
  std::vector<double> diff;
  for (int k = 0; k < o.seeds; ++k) diff.push_back(per[1][k] - per[0][k]);
  const MeanStd dm = mean_std(diff);
  char buf[96];
  std::snprintf(buf, sizeof buf, "\nPaired bn − plain share: %+.3f ± %.3f (per seed:", dm.mean, dm.std);
  md << buf;
  for (double v : diff) std::snprintf(buf, sizeof buf, " %+.3f", v), md << buf;
  md << ")\n";
  return md.str();
}

std::vector<std::string> write_init(const InitResult& r, const std::string& dir_s) {
  const auto& o = r.options;
  if (!studies::kit::write_tables(dir_s, init_csv(r), init_summary(r))) return {};
  using studies::kit::gnuplot_text;
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1100,480 font 'sans,10'\nset output 'init_sweep.png'\nset multiplot layout 1,2 title "
     << gnuplot_text(r.figure_name + ", fixed lr " + fmt4(o.lr) + ": mean " + r.score + " (%) over " +
                     std::to_string(o.seeds) + " seeds; * within " + fmt4(o.tolerance) + " points of the net's best")
     << "\nset cbrange [" << r.floor << ":100]\nset palette rgbformulae 33,13,10\nset xlabel "
     << gnuplot_text("weight scale s (x " + r.scale_name + ")") << "\nset ylabel 'hidden layers'\nset xtics (";
  for (std::size_t k = 0; k < o.scales.size(); ++k) gp << (k ? ", " : "") << gnuplot_text(fmt4(o.scales[k])) << " " << k;
  gp << ")\nset ytics (";
  for (std::size_t k = 0; k < o.depths.size(); ++k)
    gp << (k ? ", " : "") << gnuplot_text(std::to_string(o.depths[k])) << " " << k;
  gp << ")\nset xrange [-0.5:" << o.scales.size() - 0.5 << "]\nset yrange [-0.5:" << o.depths.size() - 0.5 << "]\n";
  for (bool bn : {false, true}) {
    const auto cells = cell_means(r, bn);
    std::vector<bool> mask;
    good_share(cells, o.tolerance, &mask);
    std::ostringstream dat;
    std::size_t c = 0;
    for (std::size_t i = 0; i < o.depths.size(); ++i) {
      for (std::size_t k = 0; k < o.scales.size(); ++k, ++c) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%zu %zu %.2f \"%.1f%s\"\n", k, i, 100 * cells[c], 100 * cells[c], mask[c] ? "*" : "");
        dat << buf;
      }
      dat << "\n";
    }
    const std::string f = studies::kit::data_file(dir_s, std::string("init_") + (bn ? "bn" : "plain") + ".dat", dat.str());
    gp << "set title " << gnuplot_text(bn ? "BN" : "plain") << "\nplot " << f << " using 1:2:3 with image notitle, " << f
       << " using 1:2:4 with labels noenhanced notitle\n";
  }
  gp << "unset multiplot\n";
  return studies::kit::render_figure(dir_s, "init_sweep", gp.str());
}

}  // namespace claims
