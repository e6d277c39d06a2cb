#include "commands.h"

#include <algorithm>
#include <string>

#include "deep_linear.h"
#include "hessian_study.h"
#include "init_linear.h"
#include "init_sweep.h"
#include "linear_lr_sweep.h"
#include "lr_sweep.h"
#include "mlp_probes.h"
#include "noisy_bn.h"
#include "reg_gap.h"
#include "variance_shift.h"

namespace claims {

namespace {

namespace kit = studies::kit;
using kit::add_seed_options, kit::add_threads_option, kit::CliContext, kit::on_fashion, kit::Study, kit::StudyData,
    kit::subcommand;

// --train-size and --test-size, their help after `prefix` ("MLP: ").
void add_sizes(CLI::App& sc, std::int64_t& train, std::int64_t& test, const std::string& prefix = "") {
  sc.add_option("--train-size", train, prefix + (prefix.empty() ? "Training images" : "training images"))->capture_default_str();
  sc.add_option("--test-size", test, prefix + (prefix.empty() ? "Test images" : "test images") + " (0: all 10,000)")
      ->capture_default_str();
}
// --seeds and --seed, --epochs, --batch and --lr (`lr_help`) when the options have them, then
// --train-size and --test-size: what kit::check_training_options checks, in its order.
template <class O>
void add_training(CLI::App& sc, O& o, const std::string& lr_help = "") {
  add_seed_options(sc, o.seeds, o.seed);
  sc.add_option("--epochs", o.epochs, "Epochs")->capture_default_str();
  if constexpr (requires { o.batch; }) sc.add_option("--batch", o.batch, "Minibatch size")->capture_default_str();
  if constexpr (requires { o.lr; }) sc.add_option("--lr", o.lr, lr_help)->capture_default_str();
  add_sizes(sc, o.train_size, o.test_size);
}

kit::Subcommand variance_shift(bool quick) {
  return subcommand(Study<ShiftOptions, ShiftResult>{
      "variance-shift", "Dropout before vs after BN: running_var against real_var, recalibration", "claims_variance_shift",
      true, quick_shift_options,
      [](CLI::App& sc, ShiftOptions& o) {
        sc.add_option("--ps", o.ps, "Dropout probabilities p (PyTorch: the drop probability)")->capture_default_str();
        add_training(sc, o, "SGD lr (momentum 0.9)");
        sc.add_option("--bn-momentum", o.bn_momentum, "BN running-stat momentum (PyTorch convention)")->capture_default_str();
        sc.add_option("--hidden", o.hidden, "Hidden widths (one Linear -> BN -> ReLU block each)")->capture_default_str();
        add_threads_option(sc, o.threads);
      },
      check_shift_options, on_fashion(run_variance_shift), write_shift, shift_summary}, quick);
}

// ics and landscape: the deep linear network's probes, one of the two.
kit::Subcommand deep_linear(bool quick, bool ics) {
  return subcommand(Study<LinearOptions, LinearResult>{
      ics ? "ics" : "landscape",
      ics ? "Internal covariate shift (Santurkar et al. Def. 2.1) on the deep linear network"
          : "Loss range, gradient predictiveness, effective beta along the gradient",
      ics ? "claims_ics" : "claims_landscape", false, quick_linear_options,
      [ics](CLI::App& sc, LinearOptions& o) {
        sc.add_option("--depth", o.depth, "Linear layers")->capture_default_str();
        sc.add_option("--width", o.width, "Features of every layer")->capture_default_str();
        sc.add_option("--samples", o.samples, "Gaussian samples (one full batch)")->capture_default_str();
        sc.add_option("--lr", o.lr, "Gradient-descent lr")->capture_default_str();
        sc.add_option("--steps", o.steps, "Training steps")->capture_default_str();
        sc.add_option("--every", o.every, "Probe every k-th step")->capture_default_str();
        add_seed_options(sc, o.seeds, o.seed);
        add_threads_option(sc, o.threads);
        if (ics) return;
        sc.add_option("--grid", o.grid, "Step sizes eta on the geometric grid")->capture_default_str();
        sc.add_option("--eta-min", o.eta_min, "Smallest eta, in units of lr")->capture_default_str();
        sc.add_option("--eta-max", o.eta_max, "Largest eta, in units of lr")->capture_default_str();
      },
      check_linear_options, [ics](const LinearOptions& o, const CliContext&) { return run_deep_linear(o, ics, !ics); },
      ics ? write_ics : write_landscape, ics ? ics_summary : landscape_summary}, quick);
}

kit::Subcommand lr_sweep(bool quick) {
  return subcommand(Study<SweepOptions, SweepResult>{
      "lr-sweep", "BN vs plain from --lr-min to the first diverging rate in sqrt(10) steps", "claims_lr_sweep", true,
      quick_sweep_options,
      [](CLI::App& sc, SweepOptions& o) {
        sc.add_option("--lr-min", o.lr_min, "Smallest rate")->capture_default_str();
        sc.add_option("--lr-max", o.lr_max, "Largest rate")->capture_default_str();
        add_training(sc, o);
        sc.add_option("--arch", o.arch, "mlp or cnn (normstudy's CNN, the block of models::CNN)")->capture_default_str();
        add_threads_option(sc, o.threads);
      },
      check_sweep_options, on_fashion(run_lr_sweep), write_sweep, sweep_summary}, quick);
}

kit::Subcommand noisy_bn(bool quick) {
  return subcommand(Study<NoisyOptions, NoisyResult>{
      "noisy-bn", "Santurkar et al.'s Algorithm 1 noise after BN (and after a plain layer), both nets", "claims_noisy_bn",
      true, quick_noisy_options,
      [](CLI::App& sc, NoisyOptions& o) {
        sc.add_option("--noise-mean", o.noise.mean_range, "n_m: per unit and step mu ~ U(-n_m, n_m)")->capture_default_str();
        sc.add_option("--noise-scale", o.noise.scale_max, "n_v: per unit and step sigma ~ U(1, n_v)")->capture_default_str();
        sc.add_option("--noise-jitter", o.noise.jitter, "r: per-sample std around mu and sigma")->capture_default_str();
        sc.add_option("--steps", o.linear.steps, "Deep linear network: GD steps")->capture_default_str();
        sc.add_option("--linear-lr", o.linear.lr, "Deep linear network: GD lr")->capture_default_str();
        sc.add_option("--every", o.linear.every, "Deep linear network: record the loss every k-th step")->capture_default_str();
        add_seed_options(sc, o.seeds, o.seed);
        sc.add_option("--epochs", o.epochs, "MLP: epochs")->capture_default_str();
        sc.add_option("--batch", o.batch, "MLP: minibatch size")->capture_default_str();
        sc.add_option("--lr", o.lr, "MLP: SGD lr (momentum 0.9)")->capture_default_str();
        add_sizes(sc, o.train_size, o.test_size, "MLP: ");
        sc.add_option("--hidden", o.hidden, "MLP: hidden widths")->capture_default_str();
        add_threads_option(sc, o.threads);
      },
      check_noisy_options, on_fashion(run_noisy_bn), write_noisy, noisy_summary}, quick);
}

// ics-mlp and landscape-mlp: the same probes on the Fashion-MNIST MLP.
kit::Subcommand mlp_probes(bool quick, bool ics) {
  return subcommand(Study<MlpProbeOptions, LinearResult>{
      ics ? "ics-mlp" : "landscape-mlp",
      ics ? "Internal covariate shift (Def. 2.1) on the Fashion-MNIST MLP, BN vs plain"
          : "Loss range, gradient predictiveness, effective beta on the Fashion-MNIST MLP",
      ics ? "claims_ics_mlp" : "claims_landscape_mlp", true, quick_mlp_probe_options,
      [ics](CLI::App& sc, MlpProbeOptions& o) {
        add_training(sc, o, "SGD lr (no momentum)");
        sc.add_option("--hidden", o.hidden, "Hidden widths")->capture_default_str();
        sc.add_option("--every", o.every, "Probe every k-th step (and at the first and last)")->capture_default_str();
        add_threads_option(sc, o.threads);
        if (ics) return;
        sc.add_option("--grid", o.grid, "Step sizes eta on the geometric grid")->capture_default_str();
        sc.add_option("--eta-min", o.eta_min, "Smallest eta, in units of lr")->capture_default_str();
        sc.add_option("--eta-max", o.eta_max, "Largest eta, in units of lr")->capture_default_str();
      },
      check_mlp_probe_options,
      [ics](const MlpProbeOptions& o, const CliContext& ctx) {
        return run_mlp_probes(o, kit::load_data(ctx.data_dir, o.train_size, o.test_size), ics, !ics);
      },
      ics ? write_ics : write_landscape, ics ? ics_summary : landscape_summary}, quick);
}

kit::Subcommand init_sweep(bool quick) {
  return subcommand(Study<InitOptions, InitResult>{
      "init-sweep", "Weight scale x depth, BN vs plain at a fixed lr: the region within 2 points of the best",
      "claims_init_sweep", true, quick_init_options,
      [](CLI::App& sc, InitOptions& o) {
        sc.add_option("--scales", o.scales, "Weight scales s (x the Kaiming std sqrt(2/fan_in))")->capture_default_str();
        sc.add_option("--depths", o.depths, "Hidden-layer counts")->capture_default_str();
        sc.add_option("--width", o.width, "Hidden width")->capture_default_str();
        add_training(sc, o, "SGD lr (momentum 0.9), the same for every cell");
        sc.add_option("--tolerance", o.tolerance, "Points of test accuracy from the best that count as good")
            ->capture_default_str();
        add_threads_option(sc, o.threads);
      },
      check_init_options, on_fashion(run_init_sweep), write_init, init_summary}, quick);
}

kit::Subcommand reg_gap(bool quick) {
  return subcommand(Study<GapOptions, GapResult>{
      "reg-gap", "Train - test gap, BN vs plain, across batch sizes at a matched and at each one's best lr",
      "claims_reg_gap", true, quick_gap_options,
      [](CLI::App& sc, GapOptions& o) {
        sc.add_option("--batches", o.batches, "Batch sizes")->capture_default_str();
        sc.add_option("--lrs", o.lrs, "SGD rates (momentum 0.9)")->capture_default_str();
        sc.add_option("--matched-lr", o.matched_lr, "The rate both nets share (one of --lrs)")->capture_default_str();
        add_training(sc, o);
        sc.add_option("--hidden", o.hidden, "Hidden widths")->capture_default_str();
        add_threads_option(sc, o.threads);
      },
      check_gap_options, on_fashion(run_reg_gap), write_gap, gap_summary}, quick);
}

kit::Subcommand lr_sweep_linear(bool quick) {
  return subcommand(Study<LinearSweepOptions, LinearSweepResult>{
      "lr-sweep-linear", "BN vs plain on the deep linear network, lr in sqrt(10) steps to divergence",
      "claims_lr_sweep_linear", false, quick_linear_sweep_options,
      [](CLI::App& sc, LinearSweepOptions& o) {
        sc.add_option("--lr-min", o.lr_min, "Smallest rate")->capture_default_str();
        sc.add_option("--lr-max", o.lr_max, "Largest rate")->capture_default_str();
        sc.add_option("--steps", o.steps, "GD steps per run")->capture_default_str();
        add_seed_options(sc, o.linear.seeds, o.linear.seed);
        add_threads_option(sc, o.linear.threads);
      },
      check_linear_sweep_options, [](const LinearSweepOptions& o, const CliContext&) { return run_linear_lr_sweep(o); },
      [](const LinearSweepResult& r, const std::string& dir) {
        write_linear_sweep(r, dir);
        return std::vector<std::string>{};  // the table is the result: no figure
      },
      linear_sweep_summary}, quick);
}

kit::Subcommand init_sweep_linear(bool quick) {
  return subcommand(Study<InitLinearOptions, InitResult>{
      "init-sweep-linear", "Glorot scale x depth on the deep linear network, BN vs plain: R2 within 2 points of the best",
      "claims_init_sweep_linear", false, quick_init_linear_options,
      [](CLI::App& sc, InitLinearOptions& o) {
        sc.add_option("--scales", o.scales, "Scales s of the Glorot bound")->capture_default_str();
        sc.add_option("--depths", o.depths, "Linear layers")->capture_default_str();
        sc.add_option("--steps", o.steps, "GD steps")->capture_default_str();
        sc.add_option("--lr", o.linear.lr, "GD lr")->capture_default_str();
        sc.add_option("--tolerance", o.tolerance, "Points of R2 from the best that count as good")->capture_default_str();
        add_seed_options(sc, o.linear.seeds, o.linear.seed);
        add_threads_option(sc, o.linear.threads);
      },
      check_init_linear_options, [](const InitLinearOptions& o, const CliContext&) { return run_init_sweep_linear(o); },
      write_init, init_summary}, quick);
}

kit::Subcommand hessian(bool quick) {
  return subcommand(Study<HessianOptions, HessianResult>{
      "hessian", "Hessian spectrum over training: lambda_max, outliers, the gradient's top-k share (Ghorbani et al. 2019)",
      "claims_hessian", true, quick_hessian_options,
      [](CLI::App& sc, HessianOptions& o) {
        sc.add_option("--steps", o.steps, "Probe after these SGD step counts (increasing; the last is the end)")
            ->capture_default_str();
        sc.add_option("--nets", o.nets, "chapter and/or fashion")->capture_default_str();
        sc.add_option("--arms", o.arms, "plain, bn (batch statistics) and/or bn-population (the training set's statistics)")
            ->delimiter(',')
            ->capture_default_str();
        sc.add_option("--population-every", o.population_every,
                      "bn-population: SGD steps between recomputations of the statistics")
            ->capture_default_str();
        add_seed_options(sc, o.seeds, o.seed);
        sc.add_option("--train-size", o.train_size, "Fashion-MNIST training images")->capture_default_str();
        sc.add_option("--hessian-batch", o.fashion.hessian_batch, "Fashion-MNIST: training images the Hessian is taken on")
            ->capture_default_str();
        sc.add_option("--top-k", o.spectrum.top_k, "Top eigenvalues by Lanczos (and the gradient-share eigenspace)")
            ->capture_default_str();
        sc.add_option("--lanczos-steps", o.spectrum.lanczos_steps, "Lanczos steps for the top-k (0: max(3k, 40))")
            ->capture_default_str();
        sc.add_option("--slq-probes", o.spectrum.slq.probes, "SLQ Rademacher probes")->capture_default_str();
        sc.add_option("--slq-steps", o.spectrum.slq.steps, "SLQ Lanczos steps per probe")->capture_default_str();
        add_threads_option(sc, o.threads);
      },
      check_hessian_options,
      [](const HessianOptions& o, const CliContext& ctx) {
        // Fashion-MNIST is read only when a Fashion-MNIST net is probed (training images only).
        const bool fashion = std::find(o.nets.begin(), o.nets.end(), "fashion") != o.nets.end();
        return run_hessian(o, fashion ? kit::load_data(ctx.data_dir, o.train_size, 1) : StudyData{});
      },
      write_hessian, hessian_summary}, quick);
}

}  // namespace

std::vector<studies::kit::Subcommand> commands(bool quick) {
  return {variance_shift(quick),    deep_linear(quick, true), deep_linear(quick, false), lr_sweep(quick),
          noisy_bn(quick),          mlp_probes(quick, true),  mlp_probes(quick, false),  init_sweep(quick),
          reg_gap(quick),           lr_sweep_linear(quick),   init_sweep_linear(quick),  hessian(quick)};
}

}  // namespace claims
