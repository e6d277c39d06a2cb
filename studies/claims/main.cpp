// claims: the Batch Normalization chapter's "why" claims measured against the papers.
//   claims variance-shift --out results/variance_shift   # Li et al. 2019, Fashion-MNIST MLP
//   claims ics --out results/ics                         # Santurkar et al. 2018 Def. 2.1, deep linear net
//   claims landscape --out results/landscape             # Santurkar et al. 2018 Fig. 4, deep linear net
//   claims lr-sweep --out results/lr_sweep               # Bjorck et al. 2018, Fashion-MNIST MLP
//   claims noisy-bn --out results/noisy_bn               # Santurkar et al. 2018 Algorithm 1, both nets
//   claims ics-mlp --out results/ics_mlp                 # the same probes on the Fashion-MNIST MLP
//   claims landscape-mlp --out results/landscape_mlp
//   claims init-sweep --out results/init_sweep           # weight scale x depth, BN vs plain
//   claims reg-gap --out results/reg_gap                 # train - test gap across batch sizes, |gamma|
//   claims lr-sweep-linear --out results/lr_sweep_linear # the lr range on the deep linear network
//   claims init-sweep-linear --out results/init_sweep_linear  # the same on the deep linear network
//   claims hessian --out results/hessian                 # Ghorbani et al. 2019, Hessian spectrum over training
//   claims <subcommand> --quick                          # CI smoke test (< 60 s)
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string_view>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "deep_linear.h"
#include "hessian_study.h"
#include "init_linear.h"
#include "init_sweep.h"
#include "linear_lr_sweep.h"
#include "lr_sweep.h"
#include "reg_gap.h"
#include "mlp_probes.h"
#include "noisy_bn.h"
#include "variance_shift.h"
#include <tapegrad/core/file_io.h>
#include <tapegrad/data/fashion_mnist.h>

int main(int argc, char** argv) {
  using namespace claims;
  CLI::App app{"The Batch Normalization chapter's 'why' claims measured against the papers"};
  app.require_subcommand(1);
  std::string data_dir = tapegrad::data::kFashionMnistDir, out;
  bool quiet = false;
  // --quick's smoke-test settings become the defaults before parsing, so options given explicitly win.
  bool quick = std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string_view(a) == "--quick"; });
  const CLI::Validator non_negative(
      [](std::string& v) {
        return v.find('-') == std::string::npos ? std::string() : "expected an integer >= 0, got " + v;
      },
      "UINT");

  ShiftOptions so;
  if (quick) so = quick_shift_options(so);
  auto* vs = app.add_subcommand("variance-shift", "Dropout before vs after BN: running_var against real_var, recalibration");
  vs->add_option("--ps", so.ps, "Dropout probabilities p (PyTorch: the drop probability)")->capture_default_str();
  vs->add_option("--seeds", so.seeds, "Seeds")->capture_default_str();
  vs->add_option("--seed", so.seed, "First seed")->capture_default_str()->check(non_negative);
  vs->add_option("--epochs", so.epochs, "Epochs")->capture_default_str();
  vs->add_option("--batch", so.batch, "Minibatch size")->capture_default_str();
  vs->add_option("--lr", so.lr, "SGD lr (momentum 0.9)")->capture_default_str();
  vs->add_option("--bn-momentum", so.bn_momentum, "BN running-stat momentum (PyTorch convention)")->capture_default_str();
  vs->add_option("--train-size", so.train_size, "Training images")->capture_default_str();
  vs->add_option("--test-size", so.test_size, "Test images (0: all 10,000)")->capture_default_str();
  vs->add_option("--hidden", so.hidden, "Hidden widths (one Linear -> BN -> ReLU block each)")->capture_default_str();
  vs->add_option("--threads", so.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  vs->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();

  LinearOptions lo;
  if (quick) lo = quick_linear_options(lo);
  auto* ics = app.add_subcommand("ics", "Internal covariate shift (Santurkar et al. Def. 2.1) on the deep linear network");
  auto* land = app.add_subcommand("landscape", "Loss range, gradient predictiveness, effective beta along the gradient");
  for (auto* sc : {ics, land}) {
    sc->add_option("--depth", lo.depth, "Linear layers")->capture_default_str();
    sc->add_option("--width", lo.width, "Features of every layer")->capture_default_str();
    sc->add_option("--samples", lo.samples, "Gaussian samples (one full batch)")->capture_default_str();
    sc->add_option("--lr", lo.lr, "Gradient-descent lr")->capture_default_str();
    sc->add_option("--steps", lo.steps, "Training steps")->capture_default_str();
    sc->add_option("--every", lo.every, "Probe every k-th step")->capture_default_str();
    sc->add_option("--seeds", lo.seeds, "Seeds")->capture_default_str();
    sc->add_option("--seed", lo.seed, "First seed")->capture_default_str()->check(non_negative);
    sc->add_option("--threads", lo.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  }
  land->add_option("--grid", lo.grid, "Step sizes eta on the geometric grid")->capture_default_str();
  land->add_option("--eta-min", lo.eta_min, "Smallest eta, in units of lr")->capture_default_str();
  land->add_option("--eta-max", lo.eta_max, "Largest eta, in units of lr")->capture_default_str();

  SweepOptions wo;
  if (quick) wo = quick_sweep_options(wo);
  auto* sw = app.add_subcommand("lr-sweep", "BN vs plain from --lr-min to the first diverging rate in sqrt(10) steps");
  sw->add_option("--lr-min", wo.lr_min, "Smallest rate")->capture_default_str();
  sw->add_option("--lr-max", wo.lr_max, "Largest rate")->capture_default_str();
  sw->add_option("--seeds", wo.seeds, "Seeds")->capture_default_str();
  sw->add_option("--seed", wo.seed, "First seed")->capture_default_str()->check(non_negative);
  sw->add_option("--epochs", wo.epochs, "Epochs")->capture_default_str();
  sw->add_option("--batch", wo.batch, "Minibatch size")->capture_default_str();
  sw->add_option("--train-size", wo.train_size, "Training images")->capture_default_str();
  sw->add_option("--test-size", wo.test_size, "Test images (0: all 10,000)")->capture_default_str();
  sw->add_option("--arch", wo.arch, "mlp or cnn (normstudy's CNN, the block of models::CNN)")->capture_default_str();
  sw->add_option("--threads", wo.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  sw->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();

  NoisyOptions no;
  if (quick) no = quick_noisy_options(no);
  auto* nb = app.add_subcommand("noisy-bn", "Santurkar et al.'s Algorithm 1 noise after BN (and after a plain layer), both nets");
  nb->add_option("--noise-mean", no.noise.mean_range, "n_m: per unit and step mu ~ U(-n_m, n_m)")->capture_default_str();
  nb->add_option("--noise-scale", no.noise.scale_max, "n_v: per unit and step sigma ~ U(1, n_v)")->capture_default_str();
  nb->add_option("--noise-jitter", no.noise.jitter, "r: per-sample std around mu and sigma")->capture_default_str();
  nb->add_option("--steps", no.linear.steps, "Deep linear network: GD steps")->capture_default_str();
  nb->add_option("--linear-lr", no.linear.lr, "Deep linear network: GD lr")->capture_default_str();
  nb->add_option("--every", no.linear.every, "Deep linear network: record the loss every k-th step")->capture_default_str();
  nb->add_option("--seeds", no.seeds, "Seeds")->capture_default_str();
  nb->add_option("--seed", no.seed, "First seed")->capture_default_str()->check(non_negative);
  nb->add_option("--epochs", no.epochs, "MLP: epochs")->capture_default_str();
  nb->add_option("--batch", no.batch, "MLP: minibatch size")->capture_default_str();
  nb->add_option("--lr", no.lr, "MLP: SGD lr (momentum 0.9)")->capture_default_str();
  nb->add_option("--train-size", no.train_size, "MLP: training images")->capture_default_str();
  nb->add_option("--test-size", no.test_size, "MLP: test images (0: all 10,000)")->capture_default_str();
  nb->add_option("--hidden", no.hidden, "MLP: hidden widths")->capture_default_str();
  nb->add_option("--threads", no.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  nb->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();

  MlpProbeOptions mo;
  if (quick) mo = quick_mlp_probe_options(mo);
  auto* icsm = app.add_subcommand("ics-mlp", "Internal covariate shift (Def. 2.1) on the Fashion-MNIST MLP, BN vs plain");
  auto* landm = app.add_subcommand("landscape-mlp", "Loss range, gradient predictiveness, effective beta on the Fashion-MNIST MLP");
  for (auto* sc : {icsm, landm}) {
    sc->add_option("--seeds", mo.seeds, "Seeds")->capture_default_str();
    sc->add_option("--seed", mo.seed, "First seed")->capture_default_str()->check(non_negative);
    sc->add_option("--epochs", mo.epochs, "Epochs")->capture_default_str();
    sc->add_option("--batch", mo.batch, "Minibatch size")->capture_default_str();
    sc->add_option("--lr", mo.lr, "SGD lr (no momentum)")->capture_default_str();
    sc->add_option("--train-size", mo.train_size, "Training images")->capture_default_str();
    sc->add_option("--test-size", mo.test_size, "Test images (0: all 10,000)")->capture_default_str();
    sc->add_option("--hidden", mo.hidden, "Hidden widths")->capture_default_str();
    sc->add_option("--every", mo.every, "Probe every k-th step (and at the first and last)")->capture_default_str();
    sc->add_option("--threads", mo.threads, "Worker threads (each run single-threaded)")->capture_default_str();
    sc->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();
  }
  landm->add_option("--grid", mo.grid, "Step sizes eta on the geometric grid")->capture_default_str();
  landm->add_option("--eta-min", mo.eta_min, "Smallest eta, in units of lr")->capture_default_str();
  landm->add_option("--eta-max", mo.eta_max, "Largest eta, in units of lr")->capture_default_str();

  InitOptions io;
  if (quick) io = quick_init_options(io);
  auto* is = app.add_subcommand("init-sweep", "Weight scale x depth, BN vs plain at a fixed lr: the region within 2 points of the best");
  is->add_option("--scales", io.scales, "Weight scales s (x the Kaiming std sqrt(2/fan_in))")->capture_default_str();
  is->add_option("--depths", io.depths, "Hidden-layer counts")->capture_default_str();
  is->add_option("--width", io.width, "Hidden width")->capture_default_str();
  is->add_option("--seeds", io.seeds, "Seeds")->capture_default_str();
  is->add_option("--seed", io.seed, "First seed")->capture_default_str()->check(non_negative);
  is->add_option("--epochs", io.epochs, "Epochs")->capture_default_str();
  is->add_option("--batch", io.batch, "Minibatch size")->capture_default_str();
  is->add_option("--lr", io.lr, "SGD lr (momentum 0.9), the same for every cell")->capture_default_str();
  is->add_option("--train-size", io.train_size, "Training images")->capture_default_str();
  is->add_option("--test-size", io.test_size, "Test images (0: all 10,000)")->capture_default_str();
  is->add_option("--tolerance", io.tolerance, "Points of test accuracy from the best that count as good")->capture_default_str();
  is->add_option("--threads", io.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  is->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();

  GapOptions go;
  if (quick) go = quick_gap_options(go);
  auto* rg = app.add_subcommand("reg-gap", "Train - test gap, BN vs plain, across batch sizes at a matched and at each one's best lr");
  rg->add_option("--batches", go.batches, "Batch sizes")->capture_default_str();
  rg->add_option("--lrs", go.lrs, "SGD rates (momentum 0.9)")->capture_default_str();
  rg->add_option("--matched-lr", go.matched_lr, "The rate both nets share (one of --lrs)")->capture_default_str();
  rg->add_option("--seeds", go.seeds, "Seeds")->capture_default_str();
  rg->add_option("--seed", go.seed, "First seed")->capture_default_str()->check(non_negative);
  rg->add_option("--epochs", go.epochs, "Epochs")->capture_default_str();
  rg->add_option("--train-size", go.train_size, "Training images")->capture_default_str();
  rg->add_option("--test-size", go.test_size, "Test images (0: all 10,000)")->capture_default_str();
  rg->add_option("--hidden", go.hidden, "Hidden widths")->capture_default_str();
  rg->add_option("--threads", go.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  rg->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();

  LinearSweepOptions lw;
  if (quick) lw = quick_linear_sweep_options(lw);
  auto* swl = app.add_subcommand("lr-sweep-linear", "BN vs plain on the deep linear network, lr in sqrt(10) steps to divergence");
  swl->add_option("--lr-min", lw.lr_min, "Smallest rate")->capture_default_str();
  swl->add_option("--lr-max", lw.lr_max, "Largest rate")->capture_default_str();
  swl->add_option("--steps", lw.steps, "GD steps per run")->capture_default_str();
  swl->add_option("--seeds", lw.linear.seeds, "Seeds")->capture_default_str();
  swl->add_option("--seed", lw.linear.seed, "First seed")->capture_default_str()->check(non_negative);
  swl->add_option("--threads", lw.linear.threads, "Worker threads (each run single-threaded)")->capture_default_str();

  InitLinearOptions il;
  if (quick) il = quick_init_linear_options(il);
  auto* isl = app.add_subcommand("init-sweep-linear", "Glorot scale x depth on the deep linear network, BN vs plain: R2 within 2 points of the best");
  isl->add_option("--scales", il.scales, "Scales s of the Glorot bound")->capture_default_str();
  isl->add_option("--depths", il.depths, "Linear layers")->capture_default_str();
  isl->add_option("--steps", il.steps, "GD steps")->capture_default_str();
  isl->add_option("--lr", il.linear.lr, "GD lr")->capture_default_str();
  isl->add_option("--tolerance", il.tolerance, "Points of R2 from the best that count as good")->capture_default_str();
  isl->add_option("--seeds", il.linear.seeds, "Seeds")->capture_default_str();
  isl->add_option("--seed", il.linear.seed, "First seed")->capture_default_str()->check(non_negative);
  isl->add_option("--threads", il.linear.threads, "Worker threads (each run single-threaded)")->capture_default_str();

  HessianOptions ho;
  if (quick) ho = quick_hessian_options(ho);
  auto* hs = app.add_subcommand("hessian", "Hessian spectrum over training: lambda_max, outliers, the gradient's top-k share (Ghorbani et al. 2019)");
  hs->add_option("--steps", ho.steps, "Probe after these SGD step counts (increasing; the last is the end)")->capture_default_str();
  hs->add_option("--nets", ho.nets, "chapter and/or fashion")->capture_default_str();
  hs->add_option("--arms", ho.arms, "plain, bn (batch statistics) and/or bn-population (the training set's statistics)")
      ->delimiter(',')
      ->capture_default_str();
  hs->add_option("--population-every", ho.population_every, "bn-population: SGD steps between recomputations of the statistics")
      ->capture_default_str();
  hs->add_option("--seeds", ho.seeds, "Seeds")->capture_default_str();
  hs->add_option("--seed", ho.seed, "First seed")->capture_default_str()->check(non_negative);
  hs->add_option("--train-size", ho.train_size, "Fashion-MNIST training images")->capture_default_str();
  hs->add_option("--hessian-batch", ho.fashion.hessian_batch, "Fashion-MNIST: training images the Hessian is taken on")->capture_default_str();
  hs->add_option("--top-k", ho.spectrum.top_k, "Top eigenvalues by Lanczos (and the gradient-share eigenspace)")->capture_default_str();
  hs->add_option("--lanczos-steps", ho.spectrum.lanczos_steps, "Lanczos steps for the top-k (0: max(3k, 40))")->capture_default_str();
  hs->add_option("--slq-probes", ho.spectrum.slq.probes, "SLQ Rademacher probes")->capture_default_str();
  hs->add_option("--slq-steps", ho.spectrum.slq.steps, "SLQ Lanczos steps per probe")->capture_default_str();
  hs->add_option("--threads", ho.threads, "Worker threads (each run single-threaded)")->capture_default_str();
  hs->add_option("--data", data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();

  for (auto* sc : {vs, ics, land, sw, nb, icsm, landm, is, rg, swl, isl, hs}) {
    sc->add_option("--out", out, "Output directory (CSV, summary.md, PNG)");
    sc->add_flag("--quick", quick, "Small settings for a smoke test (< 60 s); options given explicitly are kept");
    sc->add_flag("-q,--quiet", quiet, "Only warnings");
  }
  CLI11_PARSE(app, argc, argv);
  if (quiet) spdlog::set_level(spdlog::level::warn);
  // The output folder (--out, else `fallback`), checked now (created, a probe file written
  // and removed): an unwritable one fails here, not after every run has trained.
  auto use_out = [&out](const char* fallback) {
    if (out.empty()) out = fallback;
    tapegrad::check_output_dir(out);
  };
  try {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> pngs;
    if (hs->parsed()) {
      check_hessian_options(ho);
      use_out("claims_hessian");
      const bool fashion = std::find(ho.nets.begin(), ho.nets.end(), "fashion") != ho.nets.end();
      const studies::kit::StudyData d =
          fashion ? studies::kit::load_data(data_dir, ho.train_size, 1) : studies::kit::StudyData{};
      const HessianResult r = run_hessian(ho, d);
      pngs = write_hessian(r, out);
      std::cout << hessian_summary(r);
    } else if (vs->parsed()) {
      check_shift_options(so);
      use_out("claims_variance_shift");
      const studies::kit::StudyData d = studies::kit::load_data(data_dir, so.train_size, so.test_size);
      const ShiftResult r = run_variance_shift(so, d);
      pngs = write_shift(r, out);
      std::cout << shift_summary(r);
    } else if (nb->parsed()) {
      check_noisy_options(no);
      use_out("claims_noisy_bn");
      const studies::kit::StudyData d = studies::kit::load_data(data_dir, no.train_size, no.test_size);
      const NoisyResult r = run_noisy_bn(no, d);
      pngs = write_noisy(r, out);
      std::cout << noisy_summary(r);
    } else if (icsm->parsed() || landm->parsed()) {
      CLI::App* sc = icsm->parsed() ? icsm : landm;
      check_mlp_probe_options(mo);
      use_out(icsm->parsed() ? "claims_ics_mlp" : "claims_landscape_mlp");
      const studies::kit::StudyData d = studies::kit::load_data(data_dir, mo.train_size, mo.test_size);
      if (icsm->parsed()) {
        const LinearResult r = run_mlp_probes(mo, d, true, false);
        pngs = write_ics(r, out);
        std::cout << ics_summary(r);
      } else {
        const LinearResult r = run_mlp_probes(mo, d, false, true);
        pngs = write_landscape(r, out);
        std::cout << landscape_summary(r);
      }
    } else if (is->parsed()) {
      check_init_options(io);
      use_out("claims_init_sweep");
      const studies::kit::StudyData d = studies::kit::load_data(data_dir, io.train_size, io.test_size);
      const InitResult r = run_init_sweep(io, d);
      pngs = write_init(r, out);
      std::cout << init_summary(r);
    } else if (rg->parsed()) {
      check_gap_options(go);
      use_out("claims_reg_gap");
      const studies::kit::StudyData d = studies::kit::load_data(data_dir, go.train_size, go.test_size);
      const GapResult r = run_reg_gap(go, d);
      pngs = write_gap(r, out);
      std::cout << gap_summary(r);
    } else if (isl->parsed()) {
      check_init_linear_options(il);
      use_out("claims_init_sweep_linear");
      const InitResult r = run_init_sweep_linear(il);
      pngs = write_init(r, out);
      std::cout << init_summary(r);
    } else if (swl->parsed()) {
      check_linear_sweep_options(lw);
      use_out("claims_lr_sweep_linear");
      const LinearSweepResult r = run_linear_lr_sweep(lw);
      write_linear_sweep(r, out);
      std::cout << linear_sweep_summary(r);
    } else if (sw->parsed()) {
      check_sweep_options(wo);
      use_out("claims_lr_sweep");
      const studies::kit::StudyData d = studies::kit::load_data(data_dir, wo.train_size, wo.test_size);
      const SweepResult r = run_lr_sweep(wo, d);
      pngs = write_sweep(r, out);
      std::cout << sweep_summary(r);
    } else {
      CLI::App* sc = ics->parsed() ? ics : land;
      check_linear_options(lo);
      if (ics->parsed()) {
        use_out("claims_ics");
        const LinearResult r = run_deep_linear(lo, true, false);
        pngs = write_ics(r, out);
        std::cout << ics_summary(r);
      } else {
        use_out("claims_landscape");
        const LinearResult r = run_deep_linear(lo, false, true);
        pngs = write_landscape(r, out);
        std::cout << landscape_summary(r);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "\nwrote " << out << "/results.csv, " << out << "/summary.md";
    for (const auto& p : pngs) std::cout << ", " << p;
    std::cout << " (" << secs << " s)\n";
  } catch (const std::exception& e) {
    std::cerr << "claims: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
