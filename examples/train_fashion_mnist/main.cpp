// train_fashion_mnist: an MLP classifier for Fashion-MNIST, trained from C++.
//   train_fashion_mnist --norm batch --optimizer adam --epochs 15
// See trainer.h for the data pipeline and the model; the loop is the training room's fit().
#include <CLI/CLI.hpp>
#include "cli_checks.h"
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <optional>

#include "checkpoint_io.h"
#include "trainer.h"
#include <tapegrad/core/wait_policy.h>
#include <tapegrad/train/data_parallel.h>
#ifdef TAPEGRAD_FMNIST_MPI  // data-parallel over MPI: the training room's make_mpi_data_parallel
#include <tapegrad/distributed/environment.h>
#endif

int main(int argc, char** argv) {
  tapegrad::prefer_passive_wait_policy(argv);  // OpenMP threads sleep, not spin, unless OMP_WAIT_POLICY is set
  fmnist::Config cfg;
  std::string hidden = "256,128";
  double lr = 0;
  CLI::App app{"Train an MLP on Fashion-MNIST (Debian package dataset-fashion-mnist)"};
  app.add_option("--data", cfg.data_dir, "directory with the IDX files (.gz or plain)")
      ->check(tapegrad_cli::non_empty("a folder"))->capture_default_str();
  app.add_option("--epochs", cfg.epochs, "epochs")->capture_default_str()->check(CLI::Range(1, 100000).description("an integer in [1, 100000]"));
  app.add_option("--batch-size", cfg.batch_size, "mini-batch size")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  auto* lr_opt = app.add_option("--lr", lr, "learning rate (default: sgd 0.1, adam/adamw 1e-3)")
                     ->check(CLI::Range(0.0, 1e3).description("a number in [0, 1000]"));
  app.add_option("--optimizer", cfg.optimizer, "sgd (momentum 0.9) | adam | adamw")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  app.add_option("--norm", cfg.norm,
                 "normalisation after each hidden Linear: none | batch | layer; with --model cnn also group | instance")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "batch", "layer", "group", "instance"}));
  std::string channels = "32,64";
  app.add_option("--model", cfg.model, "mlp | cnn (conv-norm-ReLU-pool blocks and a linear head)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--channels", channels, "cnn: conv block widths, comma-separated")->capture_default_str();
  app.add_option("--head", cfg.cnn.head, "cnn: hidden width of the linear head (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--groups", cfg.cnn.groups, "cnn: GroupNorm groups (--norm group)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--schedule", cfg.schedule, "learning-rate schedule over the epochs: none | cosine")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "cosine"}));
  app.add_option("--dropout", cfg.dropout, "dropout probability after each hidden ReLU")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--hidden", hidden, "hidden widths, comma-separated")->capture_default_str();
  app.add_option("--seed", cfg.seed, "seed of the split, shuffles, weights and dropout masks")
      ->capture_default_str()
      ->check(tapegrad_cli::non_negative());
  app.add_option("--checkpoint", cfg.checkpoint,
                 "save the best epoch to PATH and the latest to PATH.last (weights, buffers, optimizer)")
      ->check(tapegrad_cli::non_empty("a file path"));
  app.add_option("--resume", cfg.resume, "continue exactly from a checkpoint (PATH.last or PATH)")
      ->check(tapegrad_cli::non_empty("a checkpoint file"));
  app.add_option("--threads", cfg.threads, "threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024).description("an integer in [0, 1024]"));
  app.add_option("--limit", cfg.limit, "use only the first N training images (for tests)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30).description("an integer >= 0"));
  app.add_option("--stop-after", cfg.stop_after, "stop after this many epochs (simulates an interruption)")
      ->check(CLI::Range(1, 100000).description("an integer in [1, 100000]"));
  std::string evaluate_path;
  app.add_option("--evaluate", evaluate_path,
                 "no training: test accuracy of a checkpoint alone (its architecture, weights and preprocessing)")
      ->check(tapegrad_cli::non_empty("a checkpoint file"));
  bool sync_bn = false, distributed = false, zero = false;
  app.add_flag("--sync-bn", sync_bn, "under mpirun: SyncBatchNorm, statistics over every rank's rows");
  app.add_flag("--zero-redundancy", zero,
               "under mpirun: shard the optimizer across ranks (ZeRO-1: each rank updates its part of the "
               "parameters); not with --checkpoint or --resume, also outside mpirun (no optimizer state_dict)");
  app.add_flag("--distributed", distributed, "initialise MPI even when no MPI launcher is detected");
  bool no_progress = false;
  app.add_flag("--no-progress", no_progress, "no progress bar, even on a terminal");
  if (const auto rc = tapegrad_cli::parse(app, argc, argv, "train_fashion_mnist")) return *rc;  // 2: a refused option
  // Refused in a single process too (where the flag has no effect), so a command that works
  // alone does not fail once launched under mpirun.
  if (zero && (!cfg.checkpoint.empty() || !cfg.resume.empty())) {
    spdlog::error("--zero-redundancy: not with --checkpoint or --resume (each rank holds only its shard of the "
                  "optimizer state, which checkpoints do not gather); got --zero-redundancy with {}",
                  cfg.checkpoint.empty() ? "--resume " + cfg.resume : "--checkpoint " + cfg.checkpoint);
    return 1;
  }
  if (*lr_opt) cfg.lr = lr;
  cfg.progress = !no_progress;
  int rank = 0, world = 1;
#ifdef TAPEGRAD_FMNIST_MPI
  // Under mpirun -np R (detected from the environment, or --distributed): R ranks, each
  // training on --batch-size / R rows of every batch; rank 0 logs and writes checkpoints.
  std::optional<tapegrad::distributed::Environment> env;
  try {
    env.emplace(&argc, &argv, distributed);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  rank = env->rank();
  world = env->world_size();
  if (world > 1) {
    cfg.parallel = tapegrad::train::make_mpi_data_parallel(sync_bn, zero);
    if (rank != 0) {
      spdlog::set_level(spdlog::level::warn);
      cfg.progress = false;
    }
    spdlog::info("data parallel: {} ranks x batch {}{}{}", world, cfg.batch_size / world,
                 sync_bn ? ", SyncBatchNorm" : "", zero ? ", optimizer sharded (ZeRO-1)" : "");
  }
#else
  if (distributed) {
    spdlog::error("--distributed: this build has no MPI (install libopenmpi-dev, see scripts/setup.sh)");
    return 1;
  }
#endif
  if (sync_bn && world == 1) spdlog::warn("--sync-bn has no effect in a single process");
  if (zero && world == 1) spdlog::warn("--zero-redundancy has no effect in a single process");

  try {
    if (!evaluate_path.empty()) {
      std::vector<std::vector<std::int64_t>> confusion;
      const double acc = fmnist::evaluate_checkpoint(
          evaluate_path, tapegrad::data::load_fashion_mnist(cfg.data_dir, /*train=*/false), &confusion);
      std::printf("test accuracy: %.2f%%\n%s", 100 * acc, fmnist::format_confusion(confusion).c_str());
      return 0;
    }
    cfg.hidden = fmnist::parse_hidden(hidden);
    cfg.cnn.channels = fmnist::parse_hidden(channels, "--channels");
    const fmnist::Result r = fmnist::train(cfg);
    double total = 0;
    for (const auto& e : r.history) total += e.seconds;
    if (!r.history.empty())
      spdlog::info("mean epoch time {:.2f} s over {} epochs", total / static_cast<double>(r.history.size()),
                   r.history.size());
#ifdef TAPEGRAD_FMNIST_MPI
    if (cfg.parallel && rank == 0 && total > 0) {
      const std::string comm = tapegrad::train::communication_summary(*cfg.parallel);
      spdlog::info("{} of {:.2f} s in train steps", comm, total);
    }
#endif
    if (rank == 0)
      std::printf("test accuracy: %.2f%%\n%s", 100 * r.test_accuracy, fmnist::format_confusion(r.confusion).c_str());
  } catch (const std::exception& e) {
#ifdef TAPEGRAD_FMNIST_MPI
    if (world > 1) tapegrad::distributed::abort_job(e.what());  // the other ranks may wait in a collective
#endif
    spdlog::error("{}", e.what());
    return 1;
  }
  cfg.parallel.reset();  // its communicator goes before MPI_Finalize
  return 0;
}
