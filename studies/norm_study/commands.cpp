#include "commands.h"

#include <memory>
#include <string>

#include "batch_size.h"
#include "gap.h"
#include "mode_bug_study.h"
#ifdef NORM_STUDY_MPI  // batch-size under mpirun -np R: the replicas as ranks
#include "mpi/batch_size_ranks.h"
#endif

namespace normstudy {

namespace {

using studies::kit::CliContext;
using studies::kit::Study;

// batch-size: its settings depend on what was given (--norms, --model cnn's own defaults,
// --quick after those), so it is settled after parsing.
studies::kit::Subcommand batch_size(int world, int rank) {
  struct State {
    BatchSizeOptions o;
    std::vector<std::string> norms;
  };
  auto s = std::make_shared<State>();
  studies::kit::Subcommand c;
  c.name = "batch-size";
  c.description = "Test accuracy against the per-replica batch m for each norm";
  c.default_out = "norm_study_batch_size";
  c.options = [s](CLI::App& sc) {
    BatchSizeOptions& bo = s->o;
    sc.add_option("--ms", bo.ms, "Per-replica batch sizes m")->capture_default_str();
    sc.add_option("--norms", s->norms, "Subset of batch, sync, renorm, group, layer, none (default: all)");
    sc.add_option("--replicas", bo.replicas, "R virtual replicas (global batch R·m)")->capture_default_str();
    studies::kit::add_seed_options(sc, bo.seeds, bo.seed, "Seeds per configuration");
    sc.add_option("--epochs", bo.epochs, "Epochs (the same for every m and norm)")->capture_default_str();
    sc.add_option("--train-size", bo.train_size, "Training images (fixed random subset)")->capture_default_str();
    sc.add_option("--test-size", bo.test_size, "Test images (0: all 10,000)")->capture_default_str();
    sc.add_option("--base-lr", bo.base_lr, "lr at the reference global batch (linear scaling)")->capture_default_str();
    sc.add_option("--ref-batch", bo.ref_batch, "Reference global batch of --base-lr")->capture_default_str();
    sc.add_option("--bn-momentum", bo.bn_momentum, "BN running-stat momentum (PyTorch convention)")->capture_default_str();
    sc.add_option("--model", bo.model, "mlp or cnn (cnn: its own --epochs, --train-size, --groups defaults)")
        ->capture_default_str();
    sc.add_option("--channels", bo.channels, "cnn: conv widths")->capture_default_str();
    sc.add_option("--head", bo.head, "cnn: hidden width of the head")->capture_default_str();
    sc.add_option("--groups", bo.groups, "GroupNorm groups (cnn default: 4)")->capture_default_str();
    studies::kit::add_threads_option(sc, bo.threads);
  };
  c.prepare = [s, world](CLI::App& sc, const CliContext& ctx) {
    BatchSizeOptions& bo = s->o;
    if (world > 1 && sc.count("--replicas") == 0) bo.replicas = world;  // R = the ranks
    if (!s->norms.empty()) {
      bo.kinds.clear();
      for (const auto& n : s->norms) bo.kinds.push_back(parse_kind(n));
    }
    if (bo.model == "cnn") {
      std::vector<std::string> keep;
      for (const char* f : {"--groups", "--epochs", "--train-size"})
        if (sc.count(f) > 0) keep.push_back(f);
      bo = with_cnn_defaults(bo, keep);
    }
    if (ctx.quick) {  // only the settings the command line did not give
      if (sc.count("--ms") == 0) bo.ms = {2, 8, 32};
      if (sc.count("--seeds") == 0) bo.seeds = 2;
      if (sc.count("--epochs") == 0) bo.epochs = 1;
      if (sc.count("--train-size") == 0) bo.train_size = 2048;
      if (sc.count("--test-size") == 0) bo.test_size = 2000;
    }
  };
  c.check = [s] { check_batch_size_options(s->o); };  // every option, before the data is read
  c.run = [s, world, rank](const CliContext& ctx) -> std::optional<std::vector<std::string>> {
    const BatchSizeOptions& bo = s->o;
    const StudyData d = load_data(ctx.data_dir, bo.train_size, bo.test_size);
#ifdef NORM_STUDY_MPI
    const BatchSizeResult r = world > 1 ? run_batch_size_ranks(bo, d) : run_batch_size(bo, d);
#else
    (void)world;
    const BatchSizeResult r = run_batch_size(bo, d);
#endif
    if (rank != 0) return std::nullopt;  // rank 0 writes the results
    auto pngs = write_batch_size(r, ctx.out);
    std::cout << batch_size_summary(r);
    return pngs;
  };
  return c;
}

studies::kit::Subcommand train_eval_gap(bool quick) {
  return subcommand(Study<GapOptions, GapResult>{
      "train-eval-gap", "Train-mode vs eval-mode accuracy and loss over training", "norm_study_gap", true, quick_gap_options,
      [](CLI::App& sc, GapOptions& o) {
        studies::kit::add_seed_options(sc, o.seeds, o.seed);
        sc.add_option("--epochs", o.epochs, "Epochs")->capture_default_str();
        sc.add_option("--drop-epoch", o.drop_epoch, "Epoch after which the lr drops ×0.1")->capture_default_str();
        sc.add_option("--batch", o.batch, "Minibatch size")->capture_default_str();
        sc.add_option("--lr", o.lr, "SGD lr (momentum 0.9)")->capture_default_str();
        sc.add_option("--train-size", o.train_size, "Training images")->capture_default_str();
        studies::kit::add_threads_option(sc, o.threads);
      },
      check_gap_options, studies::kit::on_fashion(run_gap), write_gap, gap_summary}, quick);
}

studies::kit::Subcommand mode_bugs(bool quick) {
  return subcommand(Study<BugOptions, BugResult>{
      "mode-bugs", "The mode-bug table on Fashion-MNIST, with each detector's verdict", "norm_study_mode_bugs", true,
      quick_bug_options,
      [](CLI::App& sc, BugOptions& o) {
        studies::kit::add_seed_options(sc, o.seeds, o.seed, "Seeds (rows: mean ± std over them)");
        sc.add_option("--epochs", o.epochs, "Epochs of each training")->capture_default_str();
        sc.add_option("--train-size", o.train_size, "Training images")->capture_default_str();
        studies::kit::add_threads_option(sc, o.threads);
      },
      check_bug_options, studies::kit::on_fashion(run_mode_bugs), write_mode_bugs, mode_bugs_summary}, quick);
}

}  // namespace

std::vector<studies::kit::Subcommand> commands(bool quick, int world, int rank) {
  return {batch_size(world, rank), train_eval_gap(quick), mode_bugs(quick)};
}

}  // namespace normstudy
