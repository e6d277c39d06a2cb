// bn_experiments: the Batch Normalization chapter's three experiments (convergence,
// learning rate, depth) on its synthetic regression data, over several seeds.
//   bn_experiments all --out results            # clean preset, 5 seeds, both eval policies
//   bn_experiments convergence --preset chapter  # the chapter's own settings
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <tapegrad/core/file_io.h>
#include <tapegrad/core/parallel.h>
#include "kit/cli.h"
#include "report.h"
#include "study.h"
#include "verdicts.h"
#include <tapegrad/core/wait_policy.h>

int main(int argc, char** argv) {
  tapegrad::prefer_passive_wait_policy(argv);  // OpenMP threads sleep, not spin, unless OMP_WAIT_POLICY is set
  using namespace bnexp;
  // Every step allocates and frees the same few small tensors. Keep freed memory in the
  // process: trimming the heap each time costs a syscall and a TLB flush on every core.
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  CLI::App app{"The Batch Normalization chapter's experiments: convergence, learning rate, depth"};
  app.require_subcommand(1);
  StudyOptions o;
  std::string out = "bn_results", norm = "batch", policy, save_dir;
  std::vector<double> lrs;
  double grad_clip = -1, act_clip = -1;
  int threads = 2;
  bool quiet = false;

  // CLI11 reads "-1" into an unsigned seed as 2^64 - 1, and 2^64 as 2^64 - 1: refused.
  const CLI::Validator& non_negative = studies::kit::non_negative();
  auto* conv = app.add_subcommand("convergence", "Experiment 1: normalised vs plain net [50,128,64,32,1] at --lr");
  auto* lr = app.add_subcommand("learning-rate", "Experiment 2: the same nets at each learning rate");
  auto* depth = app.add_subcommand("depth", "Experiment 3: 5-, 10- and 15-layer nets at lr 0.01");
  auto* all = app.add_subcommand("all", "All three experiments, reported under both evaluation policies");
  for (auto* sc : {conv, lr, depth, all}) {
    sc->add_option("--seed", o.seed, "First seed (runs use seed..seed+K-1)")->capture_default_str()->check(non_negative);
    sc->add_option("--seeds", o.seeds, "K: seeds per configuration (mean ± std, crash count)")->capture_default_str();
    sc->add_option("--epochs", o.epochs, "Epochs per run")->capture_default_str();
    sc->add_option("--batch", o.batch, "Minibatch size (remainder dropped)")->capture_default_str();
    sc->add_option("--lr", o.lr, "Learning rate of the convergence experiment")->capture_default_str();
    sc->add_option("--depth-lr", o.depth_lr, "Learning rate of the depth experiment")->capture_default_str();
    sc->add_option("--lrs", lrs, "Learning rates of the learning-rate experiment (default: the preset's)");
    sc->add_option("--bn-momentum", o.bn_momentum,
                   "BN running-stat momentum, PyTorch convention (0.01 = Keras decay 0.99)")
        ->capture_default_str();
    sc->add_option("--preset", o.preset, "chapter (its clipping, lrs, train-mode evaluation) or clean")
        ->check(CLI::IsMember({"chapter", "clean"}))
        ->capture_default_str();
    sc->add_option("--grad-clip", grad_clip, "Clamp each gradient element to [-c, c] (0 = off; overrides preset)");
    sc->add_option("--act-clip", act_clip, "Clamp hidden activations to [-c, c] (0 = off; overrides preset)");
    sc->add_option("--eval-policy", policy, "eval (model.eval(), running stats) or train (the chapter's)")
        ->check(CLI::IsMember({"eval", "train"}));
    sc->add_option("--norm", norm, "Normalisation of the normalised arm: batch, layer, group or none")
        ->check(CLI::IsMember({"batch", "layer", "group", "none"}))
        ->capture_default_str();
    sc->add_option("--target-loss", o.target_loss, "Convergence speed: epochs until the train loss <= this")
        ->capture_default_str();
    sc->add_option("--threads", threads, "Runs trained at the same time (each single-threaded)")->capture_default_str();
    sc->add_option("--out", out, "Output directory (results.csv, summary.md, *.png)")->capture_default_str();
    sc->add_option("--save", save_dir, "Save every trained net (safetensors, with BN buffers) into this directory");
    sc->add_flag("-q,--quiet", quiet, "Only warnings and the final table");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (!app.remaining().empty() && app.get_subcommands().empty()) {
      std::cerr << "bn_experiments: unknown subcommand '" << app.remaining().front()
                << "' (expected convergence | learning-rate | depth | all; see --help)\n";
      return 106;
    }
    return app.exit(e);
  }

  spdlog::set_pattern("[%H:%M:%S] %v");
  spdlog::set_level(quiet ? spdlog::level::warn : spdlog::level::info);
  try {
    o.norm = tapegrad::models::parse_norm(norm);
    if (!lrs.empty()) o.lrs = lrs;
    CLI::App* sc = app.get_subcommands().front();
    for (auto [flag, value] : {std::pair<const char*, double>{"--grad-clip", grad_clip}, {"--act-clip", act_clip}})
      if (sc->count(flag) > 0 && !(value >= 0 && std::isfinite(value)))
        throw std::invalid_argument(std::string(flag) + ": expected a finite number >= 0 (0: off), got " +
                                    std::to_string(value));
    if (sc->count("--grad-clip") > 0) o.grad_clip = grad_clip;
    if (sc->count("--act-clip") > 0) o.act_clip = act_clip;
    o.threads = threads;
    std::vector<std::string> exps;
    if (all->parsed()) {
      exps = experiment_names();
      if (policy.empty()) o.policies = std::vector<EvalPolicy>{EvalPolicy::Eval, EvalPolicy::Train};
    } else {
      exps = {conv->parsed() ? "convergence" : lr->parsed() ? "learning-rate" : "depth"};
    }
    if (!policy.empty()) o.policies = std::vector<EvalPolicy>{parse_policy(policy)};
    // Fail on an unwritable output folder now, not after every run has trained.
    // check_output_dir creates the folder and creates and removes a probe file in it.
    // An empty --out or --save given on the command line is refused (--out "" was not
    // checked, every run trained, then writing failed; --save "" saved nothing).
    for (auto [flag, dir] : {std::pair<const char*, const std::string*>{"--out", &out}, {"--save", &save_dir}})
      if (sc->count(flag) > 0 && dir->empty())
        throw std::invalid_argument(std::string(flag) + ": expected a folder path, got ''");
    for (const std::string& dir : {out, save_dir})
      if (!dir.empty()) tapegrad::check_output_dir(dir);
    // The nets are small: one thread per run, several runs at a time.
    tapegrad::set_num_threads(1);

    const auto t0 = std::chrono::steady_clock::now();
    const StudyResult s = run_study(exps, o);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::int64_t steps = 0;
    for (const auto& r : s.results) steps += r.steps;
    const auto pngs = write_outputs(s, out);
    if (!save_dir.empty()) {
      const auto saved = save_models(s, save_dir);
      spdlog::info("saved {} nets into {}", saved.size(), save_dir);
    }
    std::cout << summary_markdown(s) << "\n";
    std::cout << "Verdicts (rules and margins in " << (std::filesystem::path(out) / "summary.md").string() << "):\n"
              << verdicts_text(judge_claims(s));
    spdlog::info("{} runs, {} SGD steps in {:.1f} s; wrote {}/results.csv, {}/summary.md and {} figure(s)",
                 s.jobs.size(), steps, secs, out, out, pngs.size());
  } catch (const std::exception& e) {
    std::cerr << "bn_experiments: " << e.what() << "\n";  // stderr: stdout holds the results
    return 1;
  }
  return 0;
}
