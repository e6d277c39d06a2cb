// norm_study: the Batch Normalization chapter's claims about batch size, synchronised
// statistics, the train/eval gap and the mode bugs, measured on Fashion-MNIST.
//   norm_study batch-size --out results/batch_size        # R = 4 replicas, m = 2..64, 6 norms, 3 seeds
//   norm_study batch-size --model cnn --out results/batch_size_cnn
//   norm_study train-eval-gap --out results/gap
//   norm_study mode-bugs --out results/mode_bugs
//   norm_study <subcommand> --quick                       # CI smoke test (< 2 minutes)
#include <malloc.h>

#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "batch_size.h"
#include <tapegrad/core/file_io.h>
#include <tapegrad/data/fashion_mnist.h>
#include "gap.h"
#include "mode_bug_study.h"
#ifdef NORM_STUDY_MPI  // batch-size under mpirun -np R: the replicas as ranks
#include <tapegrad/distributed/environment.h>
#include "mpi/batch_size_ranks.h"
#endif

int main(int argc, char** argv) {
  using namespace normstudy;
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
#ifdef NORM_STUDY_MPI
  // Started by mpirun -np R (detected from the environment): batch-size runs each replica
  // as a rank (mpi/batch_size_ranks.h); rank 0 writes the results.
  tapegrad::distributed::Environment env(&argc, &argv);
  const int world = env.world_size(), rank = env.rank();
  if (rank != 0) spdlog::set_level(spdlog::level::warn);
#else
  const int world = 1, rank = 0;
#endif
  CLI::App app{"The Batch Normalization chapter's claims measured on Fashion-MNIST"};
  app.require_subcommand(1);
  std::string data_dir = tapegrad::data::kFashionMnistDir, out;
  bool quick = false, quiet = false;

  // CLI11 reads "-1" into an unsigned seed as 2^64 - 1: refuse a sign.
  const CLI::Validator non_negative(
      [](std::string& v) {
        return v.find('-') == std::string::npos ? std::string() : "expected an integer >= 0, got " + v;
      },
      "UINT");
  BatchSizeOptions bo;
  std::vector<std::string> norms;
  auto* bs = app.add_subcommand("batch-size", "Test accuracy against the per-replica batch m for each norm");
  bs->add_option("--ms", bo.ms, "Per-replica batch sizes m")->capture_default_str();
  bs->add_option("--norms", norms, "Subset of batch, sync, renorm, group, layer, none (default: all)");
  bs->add_option("--replicas", bo.replicas, "R virtual replicas (global batch R·m)")->capture_default_str();
  bs->add_option("--seeds", bo.seeds, "Seeds per configuration")->capture_default_str();
  bs->add_option("--seed", bo.seed, "First seed")->capture_default_str()->check(non_negative);
  bs->add_option("--epochs", bo.epochs, "Epochs (the same for every m and norm)")->capture_default_str();
  bs->add_option("--train-size", bo.train_size, "Training images (fixed random subset)")->capture_default_str();
  bs->add_option("--test-size", bo.test_size, "Test images (0: all 10,000)")->capture_default_str();
  bs->add_option("--base-lr", bo.base_lr, "lr at the reference global batch (linear scaling)")->capture_default_str();
  bs->add_option("--ref-batch", bo.ref_batch, "Reference global batch of --base-lr")->capture_default_str();
  bs->add_option("--bn-momentum", bo.bn_momentum, "BN running-stat momentum (PyTorch convention)")
      ->capture_default_str();
  bs->add_option("--model", bo.model, "mlp or cnn (cnn: its own --epochs, --train-size, --groups defaults)")
      ->capture_default_str();
  bs->add_option("--channels", bo.channels, "cnn: conv widths")->capture_default_str();
  bs->add_option("--head", bo.head, "cnn: hidden width of the head")->capture_default_str();
  bs->add_option("--groups", bo.groups, "GroupNorm groups (cnn default: 4)")->capture_default_str();
  bs->add_option("--threads", bo.threads, "Worker threads (each run single-threaded)")->capture_default_str();

  GapOptions go;
  auto* gap = app.add_subcommand("train-eval-gap", "Train-mode vs eval-mode accuracy and loss over training");
  gap->add_option("--seeds", go.seeds, "Seeds")->capture_default_str();
  gap->add_option("--seed", go.seed, "First seed")->capture_default_str()->check(non_negative);
  gap->add_option("--epochs", go.epochs, "Epochs")->capture_default_str();
  gap->add_option("--drop-epoch", go.drop_epoch, "Epoch after which the lr drops ×0.1")->capture_default_str();
  gap->add_option("--batch", go.batch, "Minibatch size")->capture_default_str();
  gap->add_option("--lr", go.lr, "SGD lr (momentum 0.9)")->capture_default_str();
  gap->add_option("--train-size", go.train_size, "Training images")->capture_default_str();
  gap->add_option("--threads", go.threads, "Worker threads (each run single-threaded)")->capture_default_str();

  BugOptions mo;
  auto* mb = app.add_subcommand("mode-bugs", "The mode-bug table on Fashion-MNIST, with each detector's verdict");
  mb->add_option("--seeds", mo.seeds, "Seeds (rows: mean ± std over them)")->capture_default_str();
  mb->add_option("--seed", mo.seed, "First seed")->capture_default_str()->check(non_negative);
  mb->add_option("--epochs", mo.epochs, "Epochs of each training")->capture_default_str();
  mb->add_option("--train-size", mo.train_size, "Training images")->capture_default_str();
  mb->add_option("--threads", mo.threads, "Worker threads (each run single-threaded)")->capture_default_str();

  for (auto* sc : {bs, gap, mb}) {
    sc->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")
        ->capture_default_str();
    sc->add_option("--out", out, "Output directory (CSV, summary.md, PNG)");
    sc->add_flag("--quick", quick, "Small settings for a smoke test (< 2 minutes); options given explicitly are kept");
    sc->add_flag("-q,--quiet", quiet, "Only warnings");
  }
  CLI11_PARSE(app, argc, argv);
  if (quiet) spdlog::set_level(spdlog::level::warn);
  if (world > 1 && !bs->parsed()) {
    if (rank == 0) std::cerr << "norm_study: only batch-size runs on several ranks; start this subcommand without mpirun\n";
    return 1;
  }
  if (world > 1 && bs->get_option("--replicas")->count() == 0) bo.replicas = world;  // R = the ranks
  // --quick changes only the settings the command line did not give.
  auto given = [](CLI::App* sc, const char* flag) { return sc->count(flag) > 0; };
  // The output folder (--out, else `fallback`), checked now (created, a probe file written
  // and removed): an unwritable one fails here, not after every run has trained.
  auto use_out = [&out](const char* fallback) {
    if (out.empty()) out = fallback;
    tapegrad::check_output_dir(out);
  };
  try {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> pngs;
    if (bs->parsed()) {
      if (!norms.empty()) {
        bo.kinds.clear();
        for (const auto& n : norms) bo.kinds.push_back(parse_kind(n));
      }
      if (bo.model == "cnn") {
        std::vector<std::string> keep;
        for (const char* f : {"--groups", "--epochs", "--train-size"})
          if (bs->count(f) > 0) keep.push_back(f);
        bo = with_cnn_defaults(bo, keep);
      }
      if (quick) {
        if (!given(bs, "--ms")) bo.ms = {2, 8, 32};
        if (!given(bs, "--seeds")) bo.seeds = 2;
        if (!given(bs, "--epochs")) bo.epochs = 1;
        if (!given(bs, "--train-size")) bo.train_size = 2048;
        if (!given(bs, "--test-size")) bo.test_size = 2000;
      }
      check_batch_size_options(bo);  // every option, before the data is read
      use_out("norm_study_batch_size");
      const StudyData d = load_data(data_dir, bo.train_size, bo.test_size);
#ifdef NORM_STUDY_MPI
      const BatchSizeResult r = world > 1 ? run_batch_size_ranks(bo, d) : run_batch_size(bo, d);
#else
      const BatchSizeResult r = run_batch_size(bo, d);
#endif
      if (rank != 0) return 0;  // rank 0 writes the results
      pngs = write_batch_size(r, out);
      std::cout << batch_size_summary(r);
    } else if (gap->parsed()) {
      if (quick) {
        const GapOptions q = quick_gap_options(go);
        if (!given(gap, "--seeds")) go.seeds = q.seeds;
        if (!given(gap, "--epochs")) go.epochs = q.epochs;
        if (!given(gap, "--drop-epoch")) go.drop_epoch = q.drop_epoch;
        if (!given(gap, "--train-size")) go.train_size = q.train_size;
        go.test_size = q.test_size;
      }
      check_gap_options(go);
      use_out("norm_study_gap");
      const StudyData d = load_data(data_dir, go.train_size, go.test_size);
      const GapResult r = run_gap(go, d);
      pngs = write_gap(r, out);
      std::cout << gap_summary(r);
    } else {
      if (quick) {
        const BugOptions q = quick_bug_options(mo);
        if (!given(mb, "--seeds")) mo.seeds = q.seeds;
        if (!given(mb, "--epochs")) mo.epochs = q.epochs;
        if (!given(mb, "--train-size")) mo.train_size = q.train_size;
        mo.test_size = q.test_size;
      }
      check_bug_options(mo);
      use_out("norm_study_mode_bugs");
      const StudyData d = load_data(data_dir, mo.train_size, mo.test_size);
      const BugResult r = run_mode_bugs(mo, d);
      pngs = write_mode_bugs(r, out);
      std::cout << mode_bugs_summary(r);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "\nwrote " << out << "/results.csv, " << out << "/summary.md";
    for (const auto& p : pngs) std::cout << ", " << p;
    std::cout << " (" << secs << " s)\n";
  } catch (const std::exception& e) {
#ifdef NORM_STUDY_MPI
    if (world > 1) tapegrad::distributed::abort_job(std::string("norm_study: ") + e.what());  // ranks may wait
#endif
    std::cerr << "norm_study: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
