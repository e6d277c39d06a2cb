#include "lr_sweep.h"

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
#include "kit/train_epochs.h"
#include "kit/training_options.h"
#include <tapegrad/data/dataloader.h>
#include <tapegrad/optim/sgd.h>

namespace claims {

using namespace tapegrad;

SweepOptions quick_sweep_options(SweepOptions o) {
  o = studies::kit::with_quick_size(o, {.seeds = 1, .epochs = 1, .train_size = 2048, .test_size = 2000});
  o.lr_min = 1e-2;
  o.lr_max = 1e2;
  return o;
}

void check_sweep_options(const SweepOptions& o) {
  if (!(o.lr_min > 0 && std::isfinite(o.lr_max) && o.lr_max >= o.lr_min))
    throw std::invalid_argument("--lr-min/--lr-max: expected 0 < min <= max, got " + fmt9(o.lr_min) + " " + fmt9(o.lr_max));
  studies::kit::check_training_options(o);
  if (o.arch != "mlp" && o.arch != "cnn") throw std::invalid_argument("--arch: expected mlp or cnn, got " + o.arch);
}

std::vector<double> sweep_rates(const SweepOptions& o) {
  std::vector<double> r;
  for (int k = 0;; ++k) {
    const double lr = o.lr_min * std::pow(10.0, 0.5 * k);
    if (lr > o.lr_max * (1 + 1e-9)) break;
    r.push_back(lr);
  }
  return r;
}

namespace {

SweepRun train_one(const SweepOptions& o, const studies::kit::StudyData& d, bool bn, std::uint64_t seed, double lr) {
  SweepRun run;
  run.bn = bn;
  run.seed = seed;
  run.lr = lr;
  studies::kit::ModelConfig mc;
  mc.norm = bn ? studies::kit::NormKind::Sync : studies::kit::NormKind::None;  // Sync: BatchNorm1d over the batch
  mc.hidden = o.hidden;
  mc.arch = o.arch;
  Generator init(seed), shuffle(seed + 1000003);
  studies::kit::Model m = studies::kit::build_model(mc, d.train.num_features(), 10, init);
  optim::SGD opt(m.net->parameters(), {.lr = lr});
  data::DataLoader loader = studies::kit::shuffled_batches(d.train, o.batch, shuffle);
  run.last_loss = studies::kit::train_epochs(*m.net, opt, loader, o.epochs, [&](std::int64_t step, double L) {
    if (step == 1) run.first_loss = L;
    if (std::isfinite(L) && L <= 10 * run.first_loss) return false;
    run.diverged = true;
    char buf[128];
    std::snprintf(buf, sizeof buf, "loss %.4g %s at step %lld", L,
                  std::isfinite(L) ? ("> 10x the first (" + fmt4(run.first_loss) + ")").c_str() : "not finite",
                  static_cast<long long>(step));
    run.reason = buf;
    return true;
  });
  run.test_acc = run.diverged ? NAN : studies::kit::evaluate_eval_mode(*m.net, d.test).accuracy;
  return run;
}

// First diverging rate index of one (net, seed), rates.size() when none.
std::size_t first_diverging(const SweepResult& r, bool bn, std::uint64_t seed) {
  for (std::size_t k = 0; k < r.rates.size(); ++k)
    for (const auto& run : r.runs)
      if (run.bn == bn && run.seed == seed && run.lr == r.rates[k] && run.diverged) return k;
  return r.rates.size();
}

std::string pm(const MeanStd& m, double scale = 1, int digits = 2) {
  return studies::kit::fmt_mean_std(m, {scale, digits});
}

}  // namespace

SweepResult run_lr_sweep(const SweepOptions& o, const studies::kit::StudyData& d) {
  check_sweep_options(o);
  SweepResult r;
  r.options = o;
  r.rates = sweep_rates(o);
  for (bool bn : {false, true})
    for (int s = 0; s < o.seeds; ++s)
      for (double lr : r.rates) {
        SweepRun run;
        run.bn = bn;
        run.seed = o.seed + static_cast<std::uint64_t>(s);
        run.lr = lr;
        r.runs.push_back(run);
      }
  r.seconds = studies::kit::run_grid(r.runs, o.threads, [&](auto& run) {
    run = train_one(o, d, run.bn, run.seed, run.lr);
    spdlog::info("lr-sweep {} seed {} lr {}: {}", run.bn ? "bn" : "plain", run.seed, fmt4(run.lr),
                 run.diverged ? "diverged, " + run.reason : "test " + fmt4(100 * run.test_acc) + "%");
  });
  return r;
}

std::string sweep_csv(const SweepResult& r) {
  std::string out = "net,seed,lr,diverged,first_loss,last_epoch_loss,test_acc,reason\n";
  for (const auto& run : r.runs)
    out += std::string(run.bn ? "bn" : "plain") + "," + std::to_string(run.seed) + "," + fmt9(run.lr) + "," +
           (run.diverged ? "1" : "0") + "," + fmt9(run.first_loss) + "," + fmt9(run.last_loss) + "," +
           fmt9(run.test_acc) + ",\"" + run.reason + "\"\n";
  return out;
}

std::string sweep_summary(const SweepResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims lr-sweep: summary\n\n";
  if (o.arch == "cnn") {
    md << "- CNN [Conv2d(3×3) -> norm -> ReLU -> MaxPool2d(2)] × (8, 16) -> Linear(784, 64) -> norm -> ReLU -> Linear(64, 10), "
          "BN (norm = BatchNorm2d / BatchNorm1d) vs plain (no norm), Fashion-MNIST ";
  } else {
    md << "- MLP " << studies::kit::mlp_layers(o.hidden)
       << ", BN (Linear -> BatchNorm1d -> ReLU) vs plain (Linear -> ReLU), Fashion-MNIST ";
  }
  md << o.train_size
     << " training images, plain SGD (no momentum), batch " << o.batch << ", " << o.epochs << " epochs; lr "
     << fmt4(o.lr_min) << " .. " << fmt4(o.lr_max) << " in √10 steps; seeds " << studies::kit::seed_range(o) << "\n";
  md << "- diverged: a minibatch loss NaN, Inf or > 10× the run's first minibatch loss; stable range = decades "
        "from " << fmt4(o.lr_min) << " to the first diverging rate (each rate below it is stable)\n";
  md << "- wall time " << fmt4(r.seconds) << " s with " << o.threads << " worker threads\n\n";
  md << "| net | first diverging lr (per seed) | stable range (decades, mean ± std) | best test acc (%) | at lr |\n"
        "|---|---|---|---|---|\n";
  for (bool bn : {false, true}) {
    std::vector<double> decades;
    std::string firsts;
    for (int s = 0; s < o.seeds; ++s) {
      const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(s);
      const std::size_t k = first_diverging(r, bn, seed);
      firsts += (s ? ", " : "") + (k < r.rates.size() ? fmt4(r.rates[k]) : "none ≤ " + fmt4(o.lr_max));
      decades.push_back(0.5 * static_cast<double>(k));
    }
    double best = -1, best_lr = 0;
    for (double lr : r.rates) {
      std::vector<double> a;
      for (const auto& run : r.runs)
        if (run.bn == bn && run.lr == lr && !run.diverged) a.push_back(run.test_acc);
      if (static_cast<int>(a.size()) == o.seeds && mean_std(a).mean > best) best = mean_std(a).mean, best_lr = lr;
    }
    md << "| " << (bn ? "bn" : "plain") << " | " << firsts << " | " << pm(mean_std(decades), 1, 2) << " | "
       << (best >= 0 ? fmt4(100 * best) : "—") << " | " << fmt4(best_lr) << " |\n";
  }
  md << "\n| lr | plain test acc (%) | bn test acc (%) | bn − plain (paired, points) |\n|---|---|---|---|\n";
  for (double lr : r.rates) {
    std::vector<double> p, b, diff;
    int pd = 0, bd = 0;
    for (int s = 0; s < o.seeds; ++s) {
      const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(s);
      const SweepRun *rp = nullptr, *rb = nullptr;
      for (const auto& run : r.runs)
        if (run.seed == seed && run.lr == lr) (run.bn ? rb : rp) = &run;
      if (rp->diverged) ++pd; else p.push_back(rp->test_acc);
      if (rb->diverged) ++bd; else b.push_back(rb->test_acc);
      if (!rp->diverged && !rb->diverged) diff.push_back(rb->test_acc - rp->test_acc);
    }
    auto cell = [&](const std::vector<double>& v, int div) {
      std::string c = pm(mean_std(v), 100);
      if (div) c += " (" + std::to_string(div) + " diverged)";
      return c;
    };
    md << "| " << fmt4(lr) << " | " << cell(p, pd) << " | " << cell(b, bd) << " | " << pm(mean_std(diff), 100) << " |\n";
  }
  return md.str();
}

std::vector<std::string> write_sweep(const SweepResult& r, const std::string& dir_s) {
  if (!studies::kit::write_tables(dir_s, sweep_csv(r), sweep_summary(r))) return {};
  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,520 font 'sans,10'\nset output 'lr_sweep.png'\nset title "
     << studies::kit::gnuplot_text(std::string("Fashion-MNIST ") + (r.options.arch == "cnn" ? "CNN" : "MLP") +
                                 ", plain SGD: test accuracy against lr (mean ± std over " +
                                 std::to_string(r.options.seeds) + " seeds; a missing point: a run diverged)")
     << "\nset xlabel 'learning rate'\nset ylabel 'test accuracy (%)'\n"
        "set logscale x\nset grid\nset key bottom left\nset datafile missing '?'\nplot ";
  for (bool bn : {false, true}) {
    std::ostringstream d;
    for (double lr : r.rates) {
      std::vector<double> a;
      bool any_div = false;
      for (const auto& run : r.runs)
        if (run.bn == bn && run.lr == lr) {
          if (run.diverged) any_div = true;
          else a.push_back(100 * run.test_acc);
        }
      const MeanStd m = mean_std(a);
      if (any_div || m.n == 0) d << fmt9(lr) << " ? ?\n";
      else d << fmt9(lr) << " " << fmt9(m.mean) << " " << fmt9(m.std) << "\n";
    }
    const std::string f = studies::kit::data_file(dir_s, std::string("lr_sweep_") + (bn ? "bn" : "plain") + ".dat", d.str());
    gp << (bn ? ", \\\n     " : "") << f << " using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '"
       << (bn ? "#d62728" : "#1f77b4") << "' title " << studies::kit::gnuplot_text(bn ? "BN" : "plain");
  }
  gp << "\n";
  return studies::kit::render_figure(dir_s, "lr_sweep", gp.str());
}

}  // namespace claims
