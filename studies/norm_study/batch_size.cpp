#include "batch_size.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include <tapegrad/data/dataloader.h>
#include "kit/gnuplot.h"
#include <tapegrad/optim/sgd.h>
#include "kit/stats.h"
#include "kit/option_checks.h"
#include "kit/train_epochs.h"
#include "kit/training_options.h"

namespace normstudy {

using namespace tapegrad;
using studies::kit::mean_std;
using studies::kit::MeanStd;
namespace fs = std::filesystem;

BatchSizeOptions with_cnn_defaults(BatchSizeOptions o, const std::vector<std::string>& keep) {
  auto kept = [&](const char* name) { return std::find(keep.begin(), keep.end(), name) != keep.end(); };
  o.model = "cnn";
  if (!kept("--groups")) o.groups = 4;
  if (!kept("--epochs")) o.epochs = 3;
  if (!kept("--train-size")) o.train_size = 10000;
  return o;
}

double scaled_lr(const BatchSizeOptions& o, std::int64_t m) {
  return o.base_lr * static_cast<double>(o.replicas * m) / static_cast<double>(o.ref_batch);
}

void check_batch_size_options(const BatchSizeOptions& o) {
  studies::kit::check_at_least("--replicas", o.replicas, 1);
  studies::kit::check_seeds(o.seed, o.seeds);
  studies::kit::check_at_least("--epochs", o.epochs, 1);
  if (o.model != "mlp" && o.model != "cnn")
    throw std::invalid_argument("--model: expected mlp or cnn, got '" + o.model + "'");
  if (o.ms.empty()) throw std::invalid_argument("--ms: expected at least one per-replica batch size, got none");
  for (auto m : o.ms)
    if (m < 2) throw std::invalid_argument("--ms: per-replica batch m must be >= 2 (BatchNorm refuses 1), got " +
                                           std::to_string(m));
  check_sizes(o.train_size, o.test_size);
  studies::kit::check_rate("--base-lr", o.base_lr);
  if (o.ref_batch < 1)  // the lr is base_lr · R·m / ref_batch: 0 gives inf, < 0 a negative lr
    throw std::invalid_argument("--ref-batch: expected a global batch >= 1, got " + std::to_string(o.ref_batch));
  if (!(o.bn_momentum >= 0 && o.bn_momentum <= 1))
    throw std::invalid_argument("--bn-momentum: expected a number in [0, 1] (PyTorch convention), got " +
                                fmt9(o.bn_momentum));
  if (!(o.sgd_momentum >= 0 && o.sgd_momentum < 1))
    throw std::invalid_argument("SGD momentum: expected a number in [0, 1), got " + fmt9(o.sgd_momentum));
  for (auto c : o.channels)
    if (c < 1) throw std::invalid_argument("--channels: expected widths >= 1, got " + std::to_string(c));
  if (o.channels.empty()) throw std::invalid_argument("--channels: expected at least one conv width, got none");
  if (o.head < 1) throw std::invalid_argument("--head: expected a width >= 1, got " + std::to_string(o.head));
  if (o.groups < 1) throw std::invalid_argument("--groups: expected >= 1, got " + std::to_string(o.groups));
  if (std::find(o.kinds.begin(), o.kinds.end(), NormKind::Group) != o.kinds.end()) {
    // GroupNorm splits every normalised width into --groups groups: refused now, not after the
    // other norms' runs have trained.
    std::vector<std::int64_t> widths = o.model == "cnn" ? o.channels : o.hidden;
    if (o.model == "cnn") widths.push_back(o.head);
    for (auto w : widths)
      if (w % o.groups != 0)
        throw std::invalid_argument("--groups: expected a divisor of every GroupNorm width (" +
                                    (o.model == "cnn" ? "--channels " + studies::kit::join_widths(o.channels) +
                                                            " --head " + std::to_string(o.head)
                                                      : "mlp hidden " + studies::kit::join_widths(o.hidden)) +
                                    "), got " + std::to_string(o.groups) + " (width " + std::to_string(w) + ")");
  }
  for (auto m : o.ms)  // R·m within --train-size (R·m itself may overflow)
    if (m > o.train_size / o.replicas)
      throw std::invalid_argument("--ms/--replicas: global batch " + std::to_string(o.replicas) + "·" +
                                  std::to_string(m) + " exceeds --train-size " + std::to_string(o.train_size));
  check_threads(o.threads);
}

void check_batch_size_options(const BatchSizeOptions& o, const StudyData& d) {
  check_batch_size_options(o);
  for (auto m : o.ms) {
    if (m > d.train.size() / o.replicas)  // R·m itself may overflow
      throw std::invalid_argument("--ms/--replicas: global batch " + std::to_string(o.replicas) + "·" +
                                  std::to_string(m) + " exceeds the " + std::to_string(d.train.size()) +
                                  " training images");
  }
}

ModelConfig run_model_config(const BatchSizeOptions& o, NormKind kind, int replicas) {
  ModelConfig mc;
  mc.norm = kind;
  mc.replicas = replicas;
  mc.arch = o.model;
  mc.hidden = o.hidden;
  mc.channels = o.channels;
  mc.head = o.head;
  mc.groups = o.groups;
  mc.bn_momentum = o.bn_momentum;
  return mc;
}

data::DataLoaderOptions run_loader_options(const BatchSizeOptions& o, std::int64_t m) {
  data::DataLoaderOptions lo;
  lo.batch_size = o.replicas * m;
  lo.shuffle = true;
  lo.drop_last = true;
  return lo;
}

std::uint64_t run_shuffle_seed(std::uint64_t seed) { return seed + 1000003; }

std::vector<BatchSizeRun> batch_size_grid(const BatchSizeOptions& o) {
  std::vector<BatchSizeRun> runs;
  for (NormKind k : o.kinds)
    for (auto m : o.ms)
      for (int s = 0; s < o.seeds; ++s) runs.push_back({k, m, o.seed + static_cast<std::uint64_t>(s)});
  return runs;
}

void score_run(BatchSizeRun& r, layers::Module& net, const data::Dataset& test) {
  if (r.crashed) {
    r.train_loss = r.test_loss = r.test_accuracy = std::nan("");
    return;
  }
  const Eval ev = evaluate_eval_mode(net, test);
  r.test_loss = ev.loss;
  r.test_accuracy = ev.accuracy;
  if (crashed_loss(ev.loss)) r.crashed = true;
}

namespace {

BatchSizeRun train_one(const BatchSizeOptions& o, const StudyData& d, NormKind kind, std::int64_t m,
                       std::uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  BatchSizeRun r;
  r.kind = kind;
  r.m = m;
  r.seed = seed;
  r.lr = scaled_lr(o, m);
  Generator init(seed);
  Model model = build_model(run_model_config(o, kind, o.replicas), d.train.num_features(), 10, init);
  optim::SGD opt(model.net->parameters(), {.lr = r.lr, .momentum = o.sgd_momentum});
  Generator shuffle(run_shuffle_seed(seed));
  data::DataLoader loader(d.train, run_loader_options(o, m), shuffle);
  const std::int64_t total = loader.num_batches() * o.epochs;
  auto crash = [&](std::int64_t, double loss) {
    r.crashed = crashed_loss(loss);
    return r.crashed;
  };
  auto schedule = [&](std::int64_t step, const Tensor&, const Tensor&) { renorm_schedule(model, step, total); };
  r.train_loss = train_epochs(*model.net, opt, loader, o.epochs, crash, schedule);
  score_run(r, *model.net, d.test);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

BatchSizeResult run_batch_size(const BatchSizeOptions& o, const StudyData& d) {
  check_batch_size_options(o, d);
  BatchSizeResult res;
  res.options = o;
  res.runs = batch_size_grid(o);
  // Smallest batches first: they take longest, so the last jobs to finish are short ones.
  std::vector<std::size_t> order(res.runs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return res.runs[a].m < res.runs[b].m; });
  const auto t0 = std::chrono::steady_clock::now();
  run_jobs(order.size(), o.threads, [&](std::size_t k) {
    auto& slot = res.runs[order[k]];
    slot = train_one(o, d, slot.kind, slot.m, slot.seed);
    spdlog::info("batch-size {:<6} m={:<3} seed={} lr={:.4g}: test acc {:.2f}%{} ({:.1f} s)", kind_name(slot.kind),
                 slot.m, slot.seed, slot.lr, 100 * slot.test_accuracy, slot.crashed ? " CRASHED" : "", slot.seconds);
  });
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string batch_size_csv(const BatchSizeResult& r) {
  const auto& o = r.options;
  std::string out =
      "model,norm,replicas,m,global_batch,lr,epochs,train_size,seed,crashed,train_loss,test_loss,test_accuracy\n";
  for (const auto& x : r.runs)
    out += o.model + "," + kind_name(x.kind) + "," + std::to_string(o.replicas) + "," + std::to_string(x.m) + "," +
           std::to_string(o.replicas * x.m) + "," + fmt9(x.lr) + "," + std::to_string(o.epochs) + "," +
           std::to_string(o.train_size) + "," + std::to_string(x.seed) + "," + (x.crashed ? "1" : "0") + "," +
           fmt9(x.train_loss) + "," + fmt9(x.test_loss) + "," + fmt9(x.test_accuracy) + "\n";
  return out;
}

namespace {

// Test accuracies (percent) of (kind, m) by seed; crashed runs absent.
std::map<std::uint64_t, double> accs(const BatchSizeResult& r, NormKind k, std::int64_t m) {
  std::map<std::uint64_t, double> out;
  for (const auto& x : r.runs)
    if (x.kind == k && x.m == m && !x.crashed) out[x.seed] = 100 * x.test_accuracy;
  return out;
}
MeanStd acc_stats(const BatchSizeResult& r, NormKind k, std::int64_t m) {
  std::vector<double> v;
  for (auto& [s, a] : accs(r, k, m)) v.push_back(a);
  return mean_std(v);
}
int crashed(const BatchSizeResult& r, NormKind k, std::int64_t m, int* runs) {
  int c = 0, n = 0;
  for (const auto& x : r.runs)
    if (x.kind == k && x.m == m) ++n, c += x.crashed;
  if (runs) *runs = n;
  return c;
}
// Paired difference (a - b) over the seeds both have, in accuracy points.
MeanStd paired(const BatchSizeResult& r, NormKind ka, std::int64_t ma, NormKind kb, std::int64_t mb) {
  const auto a = accs(r, ka, ma), b = accs(r, kb, mb);
  std::vector<double> d;
  for (auto& [s, v] : a)
    if (b.count(s)) d.push_back(v - b.at(s));
  return mean_std(d);
}
std::string pm(const MeanStd& m) { return fmt_mean_std(m); }
std::string signed_pm(const MeanStd& m) { return fmt_mean_std(m, {1, 2, Notation::Fixed, true}); }
bool has(const BatchSizeOptions& o, NormKind k) { return std::find(o.kinds.begin(), o.kinds.end(), k) != o.kinds.end(); }
bool has_m(const BatchSizeOptions& o, std::int64_t m) { return std::find(o.ms.begin(), o.ms.end(), m) != o.ms.end(); }

}  // namespace

std::string batch_size_summary(const BatchSizeResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# norm_study batch-size: summary\n\n";
  if (o.model == "cnn") {
    md << "- model cnn 1×28×28";
    for (auto c : o.channels) md << " → Conv3×3(" << c << ") → norm → ReLU → MaxPool2";
    md << " → Linear(" << o.head << ") → norm → ReLU → Linear(10); Fashion-MNIST, " << o.train_size;
  } else {
    md << "- model " << o.model << " 784";
    for (auto h : o.hidden) md << "-" << h;
    md << "-10 (Linear → norm → ReLU); Fashion-MNIST, " << o.train_size;
  }
  md
     << " training images (a fixed random subset), test set " << (o.test_size > 0 ? o.test_size : 10000) << "\n";
  md << "- R = " << o.replicas << (o.mpi_ranks ? " replicas as MPI ranks" : " virtual replicas")
     << ", per-replica batch m, global batch R·m; " << o.epochs
     << " epochs for every m and norm (the same samples seen)\n";
  md << "- SGD momentum " << fmt9(o.sgd_momentum) << ", lr = " << fmt9(o.base_lr) << " · R·m / " << o.ref_batch
     << " (linear scaling), constant; cross-entropy; BN momentum " << fmt9(o.bn_momentum) << "\n";
  md << "- batch/renorm: statistics per replica (m rows), running stats of replica 0 (DDP broadcast_buffers); "
        "sync: statistics over all R·m rows; group: GroupNorm("
     << o.groups << "); layer: LayerNorm" << (o.model == "cnn" ? " over (C, H, W) and (width)" : "") << "\n";
  md << "- seeds " << studies::kit::seed_range(o)
     << "; test accuracy (eval mode, %) mean ± sample std over the runs that did not crash\n";
  md << "- wall time " << fmt4(r.seconds) << " s with " << o.threads << " worker threads\n\n";
  md << "| norm |";
  for (auto m : o.ms) md << " m = " << m << " |";
  md << " crashed |\n|---|";
  for (std::size_t i = 0; i < o.ms.size(); ++i) md << "---|";
  md << "---|\n";
  for (NormKind k : o.kinds) {
    md << "| " << kind_name(k) << " |";
    int c = 0, n = 0;
    for (auto m : o.ms) {
      int runs = 0;
      c += crashed(r, k, m, &runs);
      n += runs;
      md << " " << pm(acc_stats(r, k, m)) << " |";
    }
    md << " " << c << "/" << n << " |\n";
  }
  // The chapter's claims, as paired differences over seeds (same init and batches).
  md << "\n## The chapter's claims (paired differences over seeds, accuracy points)\n\n";
  using K = NormKind;
  auto line = [&](const std::string& what, const MeanStd& d) { md << "- " << what << ": " << signed_pm(d) << "\n"; };
  const std::int64_t lo = o.ms.front(), hi = o.ms.back();
  if (has(o, K::Batch)) {
    md << "\n**BN's statistics become unreliable below m = 8** (BN against SyncBN at the same m isolates the "
          "statistics: same global batch, lr and steps)\n";
    for (auto m : o.ms)
      if (has(o, K::Sync)) line("BN − SyncBN at m = " + std::to_string(m), paired(r, K::Batch, m, K::Sync, m));
    if (has_m(o, 8))
      for (auto m : o.ms)
        if (m < 8) line("BN(m = " + std::to_string(m) + ") − BN(m = 8)", paired(r, K::Batch, m, K::Batch, 8));
  }
  if (has(o, K::Renorm) && has(o, K::Batch)) {
    md << "\n**BatchRenorm is more stable than BN at small batches**\n";
    for (auto m : o.ms)
      if (m <= 8) line("Renorm − BN at m = " + std::to_string(m), paired(r, K::Renorm, m, K::Batch, m));
  }
  md << "\n**GroupNorm and LayerNorm do not depend on the batch size** (range of the mean over m; 'none' shows "
        "what the optimisation alone does across m)\n";
  for (K k : {K::Group, K::Layer, K::None, K::Batch, K::Sync}) {
    if (!has(o, k)) continue;
    double mn = 1e9, mx = -1e9;
    int with_runs = 0;
    for (auto m : o.ms) {
      const auto s = acc_stats(r, k, m);
      if (s.n == 0) continue;
      ++with_runs;
      mn = std::min(mn, s.mean), mx = std::max(mx, s.mean);
    }
    if (with_runs == 0) {
      md << "- " << kind_name(k) << ": all runs crashed (no accuracy at any m)\n";
      continue;
    }
    md << "- " << kind_name(k) << ": mean from " << fmt4(mn) << " to " << fmt4(mx) << " (range " << fmt4(mx - mn)
       << " points); " << kind_name(k) << "(m = " << lo << ") − " << kind_name(k) << "(m = " << hi
       << "): " << signed_pm(paired(r, k, lo, k, hi)) << "\n";
  }
  if (has(o, K::Group) && has(o, K::Batch)) {
    md << "\n**GN beats BN for small batches**"
       << (o.model == "cnn" ? " (the chapter's claim is about CNNs)\n" : " (MLP here; the chapter's claim is about CNNs)\n");
    for (auto m : o.ms) line("GN − BN at m = " + std::to_string(m), paired(r, K::Group, m, K::Batch, m));
  }
  if (has(o, K::Batch)) {
    md << "\n**With m ≥ 16 BN is the better choice**\n";
    for (auto m : o.ms) {
      if (m < 16) continue;
      for (K k : {K::Group, K::Layer, K::None, K::Renorm})
        if (has(o, k)) line("BN − " + kind_name(k) + " at m = " + std::to_string(m), paired(r, K::Batch, m, k, m));
    }
  }
  if (has(o, K::Sync) && has(o, K::Batch)) {
    md << "\n**Synchronising statistics across devices removes the small-batch penalty**\n";
    for (auto m : o.ms)
      if (m <= 8) line("SyncBN − BN at m = " + std::to_string(m), paired(r, K::Sync, m, K::Batch, m));
    if (has_m(o, 16))
      for (auto m : o.ms)
        if (m < 16) line("SyncBN(m = " + std::to_string(m) + ") − BN(m = 16)", paired(r, K::Sync, m, K::Batch, 16));
  }
  return md.str();
}

std::vector<std::string> write_batch_size(const BatchSizeResult& r, const std::string& dir_s) {
  if (!studies::kit::write_tables(dir_s, batch_size_csv(r), batch_size_summary(r))) return {};
  static const std::map<NormKind, std::string> color{{NormKind::Batch, "#1f77b4"}, {NormKind::Sync, "#17becf"},
                                                     {NormKind::Renorm, "#ff7f0e"}, {NormKind::Group, "#9467bd"},
                                                     {NormKind::Layer, "#2ca02c"}, {NormKind::None, "#d62728"}};
  const auto& o = r.options;
  using studies::kit::gnuplot_text;
  std::ostringstream gp;
  gp << "set terminal pngcairo size 960,600 font 'sans,10'\nset output 'accuracy_vs_m.png'\n"
        "set datafile missing '?'\nset logscale x 2\nset xlabel "
     << gnuplot_text("per-replica batch m (global batch " + std::to_string(o.replicas) + "·m)")
     << "\nset ylabel 'test accuracy (%)'\nset grid\nset key bottom right\nset title "
     << gnuplot_text("Fashion-MNIST " + o.model + ", R = " + std::to_string(o.replicas) + " replicas, " +
                     std::to_string(o.epochs) + " epochs, lr ∝ R·m: mean ± std over " + std::to_string(o.seeds) +
                     " seeds")
     << "\n";
  const double span = std::log2(static_cast<double>(o.ms.back()) / static_cast<double>(o.ms.front()));
  gp << "set xrange [" << fmt9(o.ms.front() / 1.3) << ":" << fmt9(o.ms.back() * 1.3) << "]\nplot ";
  bool first = true;
  int idx = 0;
  for (NormKind k : o.kinds) {
    std::ostringstream d;
    // Small horizontal offsets keep the error bars apart.
    const double off = std::pow(2.0, (idx++ - 2.5) * 0.025 * std::max(1.0, span / 5));
    for (auto m : o.ms) {
      const auto s = acc_stats(r, k, m);
      if (s.n == 0) d << fmt9(m * off) << " ? ?\n";
      else d << fmt9(m * off) << " " << fmt9(s.mean) << " " << fmt9(s.std) << "\n";
    }
    const std::string f = studies::kit::data_file(dir_s, "accuracy_" + kind_name(k) + ".dat", d.str());
    if (!first) gp << ", \\\n     ";
    first = false;
    gp << f << " using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '" << color.at(k) << "' title " << gnuplot_text(kind_name(k));
  }
  gp << "\n";
  return studies::kit::render_figure(dir_s, "accuracy_vs_m", gp.str());
}

}  // namespace normstudy
