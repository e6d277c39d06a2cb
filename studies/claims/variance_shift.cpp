#include "variance_shift.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "bn_moments.h"
#include "kit/gnuplot.h"
#include "kit/stats.h"
#include "kit_names.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"
#include <tapegrad/data/dataloader.h>
#include <tapegrad/debug/recalibrate.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/optim/sgd.h>

namespace claims {

using namespace tapegrad;

ShiftOptions quick_shift_options(ShiftOptions o) {
  return studies::kit::with_quick_size(o, {.seeds = 2, .epochs = 1, .train_size = 2048, .test_size = 2000});
}

void check_shift_options(const ShiftOptions& o) {
  if (o.ps.empty()) throw std::invalid_argument("--ps: expected at least one Dropout probability");
  for (double p : o.ps)
    if (!(p > 0 && p < 1)) throw std::invalid_argument("--ps: expected probabilities in (0, 1), got " + fmt9(p));
  studies::kit::check_training_options(o);
  if (!(o.bn_momentum > 0 && o.bn_momentum <= 1))
    throw std::invalid_argument("--bn-momentum: expected a number in (0, 1], got " + fmt9(o.bn_momentum));
  studies::kit::check_widths("--hidden", o.hidden);
}

namespace {

struct ShiftNet {
  std::shared_ptr<layers::Sequential> net;
  std::vector<layers::BatchNormBase*> bns;
};

ShiftNet build_unchecked(const ShiftOptions& o, bool before, double p, std::int64_t in, Generator& init,
                         Generator& drop) {
  ShiftNet s;
  s.net = std::make_shared<layers::Sequential>();
  layers::BatchNormOptions bo;
  bo.momentum = o.bn_momentum;
  std::int64_t width = in;
  for (std::size_t i = 0; i < o.hidden.size(); ++i) {
    s.net->push_back(std::make_shared<layers::Linear>(width, o.hidden[i], true, Dtype::Float32, init));
    if (before) s.net->push_back(std::make_shared<layers::Dropout>(p, &drop));
    auto bn = std::make_shared<layers::BatchNorm1d>(o.hidden[i], bo);
    s.bns.push_back(bn.get());
    s.net->push_back(bn);
    s.net->push_back(std::make_shared<layers::ReLU>());
    width = o.hidden[i];
  }
  if (!before) s.net->push_back(std::make_shared<layers::Dropout>(p, &drop));
  s.net->push_back(std::make_shared<layers::Linear>(width, 10, true, Dtype::Float32, init));
  return s;
}

ShiftNet build(const ShiftOptions& o, bool before, double p, std::int64_t in, Generator& init, Generator& drop) {
  return studies::kit::name_out_of_memory("--hidden " + studies::kit::join_widths(o.hidden),
                                     [&] { return build_unchecked(o, before, p, in, init, drop); });
}

ShiftRun train_one(const ShiftOptions& o, const studies::kit::StudyData& d, double p, bool before, std::uint64_t seed) {
  ShiftRun run;
  run.placement = before ? "before" : "after";
  run.p = p;
  run.seed = seed;
  Generator init(seed), drop(seed + 7919), shuffle(seed + 1000003);
  ShiftNet s = build(o, before, p, d.train.num_features(), init, drop);
  optim::SGD opt(s.net->parameters(), {.lr = o.lr, .momentum = 0.9});
  data::DataLoader loader = studies::kit::shuffled_batches(d.train, o.batch, shuffle);
  s.net->train();
  for (int e = 1; e <= o.epochs && !run.crashed; ++e)
    for (auto b : loader)
      if (studies::kit::crashed_loss(studies::kit::train_step(*s.net, opt, b.X, b.y))) {
        run.crashed = true;
        break;
      }
  if (run.crashed) return run;
  // real_var: what each BN sees in eval mode (Dropout off) on the training data.
  const std::vector<ChannelMoments> real = eval_input_moments(*s.net, s.bns, d.train.X);
  const double q = 1.0 - p;
  for (std::size_t l = 0; l < s.bns.size(); ++l) {
    LayerShift ls;
    ls.module = "bn" + std::to_string(l + 1);
    const auto rv = s.bns[l]->running_var.to_vector();
    const std::size_t C = rv.size();
    for (std::size_t c = 0; c < C; ++c) {
      const double real_var = real[l].var[c], mu2 = real[l].mean[c] * real[l].mean[c];
      ls.ratio += std::max(real_var / rv[c], rv[c] / real_var);
      ls.running_over_real += rv[c] / real_var;
      ls.mean_sq_over_var += mu2 / real_var;
      ls.predicted += before ? 1.0 / q + mu2 / real_var * (1.0 / q - 1.0) : 1.0;
      if (mu2 / real_var < 0.05) ++ls.near_zero_channels, ls.near_zero_ratio += std::max(real_var / rv[c], rv[c] / real_var);
    }
    ls.near_zero_ratio = ls.near_zero_channels ? ls.near_zero_ratio / ls.near_zero_channels : NAN;
    ls.ratio /= static_cast<double>(C);
    ls.running_over_real /= static_cast<double>(C);
    ls.mean_sq_over_var /= static_cast<double>(C);
    ls.predicted /= static_cast<double>(C);
    ls.predicted_zero_mean = before ? 1.0 / q : 1.0;
    run.layers.push_back(ls);
  }
  run.train_acc = studies::kit::evaluate_eval_mode(*s.net, d.train).accuracy;
  run.test_acc = studies::kit::evaluate_eval_mode(*s.net, d.test).accuracy;
  debug::recalibrate_batch_norm(*s.net, d.train.X, 1000);
  run.train_acc_recal = studies::kit::evaluate_eval_mode(*s.net, d.train).accuracy;
  run.test_acc_recal = studies::kit::evaluate_eval_mode(*s.net, d.test).accuracy;
  return run;
}

std::string pm(const MeanStd& m, double scale = 1, int digits = 2) {
  return studies::kit::fmt_mean_std(m, {scale, digits});
}

template <class F>
MeanStd over(const ShiftResult& r, double p, const std::string& placement, F f) {
  std::vector<double> v;
  for (const auto& run : r.runs)
    if (run.p == p && run.placement == placement && !run.crashed && std::isfinite(f(run))) v.push_back(f(run));
  return mean_std(v);
}

}  // namespace

ShiftResult run_variance_shift(const ShiftOptions& o, const studies::kit::StudyData& d) {
  check_shift_options(o);
  ShiftResult r;
  r.options = o;
  struct Job {
    double p;
    bool before;
    std::uint64_t seed;
  };
  std::vector<Job> jobs;
  for (double p : o.ps)
    for (bool before : {true, false})
      for (int s = 0; s < o.seeds; ++s) jobs.push_back({p, before, o.seed + static_cast<std::uint64_t>(s)});
  r.runs.resize(jobs.size());
  const auto t0 = std::chrono::steady_clock::now();
  studies::kit::run_jobs(jobs.size(), o.threads, [&](std::size_t k) {
    r.runs[k] = train_one(o, d, jobs[k].p, jobs[k].before, jobs[k].seed);
    const auto& run = r.runs[k];
    spdlog::info("variance-shift p {} {} seed {}: bn1 ratio {:.3f}, test {:.2f}% -> {:.2f}% recalibrated", run.p,
                 run.placement, run.seed, run.layers.empty() ? 0.0 : run.layers[0].ratio, 100 * run.test_acc,
                 100 * run.test_acc_recal);
  });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string shift_csv(const ShiftResult& r) {
  std::string out =
      "p,placement,seed,layer,ratio,running_over_real,predicted_zero_mean,predicted,mean_sq_over_var,near_zero_channels,"
      "near_zero_ratio,train_acc,"
      "test_acc,train_acc_recal,test_acc_recal\n";
  for (const auto& run : r.runs) {
    const std::string acc = fmt9(run.train_acc) + "," + fmt9(run.test_acc) + "," + fmt9(run.train_acc_recal) + "," +
                            fmt9(run.test_acc_recal);
    if (run.crashed) {
      out += fmt9(run.p) + "," + run.placement + "," + std::to_string(run.seed) + ",crashed,,,,,,,,,,,\n";
      continue;
    }
    for (const auto& l : run.layers)
      out += fmt9(run.p) + "," + run.placement + "," + std::to_string(run.seed) + "," + l.module + "," + fmt9(l.ratio) +
             "," + fmt9(l.running_over_real) + "," + fmt9(l.predicted_zero_mean) + "," + fmt9(l.predicted) + "," +
             fmt9(l.mean_sq_over_var) + "," + std::to_string(l.near_zero_channels) + "," + fmt9(l.near_zero_ratio) + "," + acc + "\n";
  }
  return out;
}

std::string shift_summary(const ShiftResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# claims variance-shift: summary\n\n";
  md << "- MLP " << studies::kit::mlp_layers(o.hidden)
     << " (Linear -> BN -> ReLU), Fashion-MNIST " << o.train_size << " training images, SGD momentum 0.9, lr "
     << fmt9(o.lr) << ", batch " << o.batch << ", " << o.epochs << " epochs, BN momentum " << fmt9(o.bn_momentum)
     << "; seeds " << studies::kit::seed_range(o) << "; mean ± std over seeds\n";
  md << "- before: Dropout(p) directly before every BN; after: Dropout(p) after the last BN's ReLU\n";
  md << "- ratio: mean over channels of max(real_var/running_var, running_var/real_var), real_var = the variance "
        "of the BN input in eval mode on the training data; prediction 1/(1−p) for zero-mean inputs, "
        "1/(1−p) + (μ²/σ²)·p/(1−p) with the measured per-channel mean\n";
  md << "- wall time " << fmt4(r.seconds) << " s with " << o.threads << " worker threads\n\n";
  md << "| p | placement | layer | ratio | running/real | predicted (zero mean) | predicted (measured mean) | μ²/σ² | ratio where μ²/σ² < 0.05 (channels) |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (double p : o.ps)
    for (const std::string pl : {"before", "after"})
      for (std::size_t l = 0; l < o.hidden.size(); ++l) {
        auto f = [&](auto g) { return over(r, p, pl, [&](const ShiftRun& run) { return g(run.layers[l]); }); };
        md << "| " << fmt4(p) << " | " << pl << " | bn" << l + 1 << " | "
           << pm(f([](const LayerShift& x) { return x.ratio; }), 1, 3) << " | "
           << pm(f([](const LayerShift& x) { return x.running_over_real; }), 1, 3) << " | "
           << fmt4(pl == "before" ? 1.0 / (1.0 - p) : 1.0) << " | "
           << pm(f([](const LayerShift& x) { return x.predicted; }), 1, 3) << " | "
           << pm(f([](const LayerShift& x) { return x.mean_sq_over_var; }), 1, 3) << " | "
           << pm(f([](const LayerShift& x) { return x.near_zero_ratio; }), 1, 3) << " ("
           << fmt4(f([](const LayerShift& x) { return static_cast<double>(x.near_zero_channels); }).mean) << ") |\n";
      }
  md << "\n| p | placement | train acc (%) | test acc (%) | train acc recalibrated | test acc recalibrated | "
        "test gain (points) | recovered of the before–after gap |\n|---|---|---|---|---|---|---|---|\n";
  for (double p : o.ps) {
    const MeanStd after_test = over(r, p, "after", [](const ShiftRun& x) { return x.test_acc; });
    for (const std::string pl : {"before", "after"}) {
      const MeanStd test = over(r, p, pl, [](const ShiftRun& x) { return x.test_acc; });
      const MeanStd gain = over(r, p, pl, [](const ShiftRun& x) { return x.test_acc_recal - x.test_acc; });
      std::string recovered = "—";
      if (pl == "before" && after_test.n > 0 && test.n > 0) {
        const double lost = after_test.mean - test.mean;
        char buf[96];
        if (lost > 0) std::snprintf(buf, sizeof buf, "%.0f%% (%.2f of %.2f points)", 100 * gain.mean / lost, 100 * gain.mean, 100 * lost);
        else std::snprintf(buf, sizeof buf, "no loss (before − after = %+.2f points)", -100 * lost);
        recovered = buf;
      }
      md << "| " << fmt4(p) << " | " << pl << " | " << pm(over(r, p, pl, [](const ShiftRun& x) { return x.train_acc; }), 100)
         << " | " << pm(test, 100) << " | "
         << pm(over(r, p, pl, [](const ShiftRun& x) { return x.train_acc_recal; }), 100) << " | "
         << pm(over(r, p, pl, [](const ShiftRun& x) { return x.test_acc_recal; }), 100) << " | "
         << pm(gain, 100) << " | " << recovered << " |\n";
    }
  }
  return md.str();
}

std::vector<std::string> write_shift(const ShiftResult& r, const std::string& dir_s) {
  if (!studies::kit::write_tables(dir_s, shift_csv(r), shift_summary(r))) return {};
  const auto& o = r.options;
  std::ostringstream dat;
  // x = p, then per placement and layer: mean, std of the ratio; the two predictions.
  for (double p : o.ps) {
    dat << fmt9(p);
    for (const std::string pl : {"before", "after"})
      for (std::size_t l = 0; l < o.hidden.size(); ++l) {
        const MeanStd m = over(r, p, pl, [&](const ShiftRun& x) { return x.layers[l].ratio; });
        dat << " " << fmt9(m.mean) << " " << fmt9(m.std);
      }
    const MeanStd pred = over(r, p, "before", [](const ShiftRun& x) { return x.layers[0].predicted; });
    dat << " " << fmt9(1.0 / (1.0 - p)) << " " << fmt9(pred.mean) << "\n";
  }
  const std::string f = studies::kit::data_file(dir_s, "variance_shift.dat", dat.str());
  const std::size_t L = o.hidden.size();
  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,560 font 'sans,10'\nset output 'variance_shift.png'\nset title "
     << studies::kit::gnuplot_text("Variance shift: max(real/running, running/real) per BN layer (mean ± std over " +
                                 std::to_string(o.seeds) + " seeds)")
     << "\nset xlabel 'Dropout p'\nset ylabel 'ratio'\nset grid\nset key top left\nset xrange [0:0.6]\nplot ";
  const std::vector<std::string> colors{"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c"};
  int k = 0;
  for (const std::string pl : {"before", "after"})
    for (std::size_t l = 0; l < L; ++l, ++k) {
      const std::size_t col = 2 + 2 * static_cast<std::size_t>(k);
      gp << f << " using 1:" << col << ":" << col + 1 << " with yerrorlines lw 2 pt 7 lc rgb '"
         << colors[static_cast<std::size_t>(k) % colors.size()] << "' title "
         << studies::kit::gnuplot_text("Dropout " + pl + " BN, bn" + std::to_string(l + 1)) << ", \\\n     ";
    }
  const std::size_t pc = 2 + 4 * L;
  gp << f << " using 1:" << pc << " with lines dt 2 lw 2 lc rgb 'black' title "
     << studies::kit::gnuplot_text("1/(1-p) (zero-mean input)") << ", \\\n     " << f << " using 1:" << pc + 1
     << " with lines dt 3 lw 2 lc rgb 'gray40' title " << studies::kit::gnuplot_text("prediction with measured mean, bn1")
     << "\n";
  return studies::kit::render_figure(dir_s, "variance_shift", gp.str());
}

}  // namespace claims
