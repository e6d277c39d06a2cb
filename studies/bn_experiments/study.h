#pragma once
// The chapter's three experiments as lists of runs, and running them (in parallel threads).
//   convergence:   [50,128,64,32,1], normalised vs plain, one lr (default 0.01)
//   learning-rate: the same nets at each lr of the preset
//   depth:         [50,128,64,32,16,1], [50,128,128,64,64,32,32,16,16,8,1],
//                  [50]+[64]x14+[1] (5, 10 and 15 Linear layers) at lr 0.01
#include <optional>
#include <string>
#include <vector>

#include "kit/option_checks.h"
#include "kit/run.h"

namespace bnexp {

// The chapter's data and training protocol (studies/kit/).
using namespace studies::kit;

/// Settings of a study. apply_preset() fills what the user did not set.
///  chapter: gradients clipped elementwise at 5 (except the plain depth nets), hidden
///           activations clipped to [-10, 10], lrs 0.001/0.01/0.05, train-mode evaluation,
///           BN decay 0.99 (= PyTorch momentum 0.01, layers::momentum_from_decay(0.99)).
///  clean:   no clipping, lrs 0.001/0.01/0.05/0.1, eval-mode evaluation, BN momentum 0.01.
struct StudyOptions {
  std::string preset = "clean";
  std::uint64_t seed = 0;  ///< first seed; runs use seed, seed+1, ..., seed+seeds-1
  int seeds = 5;
  int epochs = 200;
  std::int64_t batch = 32;
  double lr = 0.01;        ///< convergence experiment
  double depth_lr = 0.01;  ///< depth experiment
  std::optional<std::vector<double>> lrs;           ///< learning-rate experiment (preset if unset)
  double bn_momentum = 0.01;                        ///< PyTorch convention
  std::optional<double> grad_clip, act_clip;        ///< override the preset; 0 disables
  std::optional<std::vector<EvalPolicy>> policies;  ///< preset if unset
  tapegrad::models::Norm norm = tapegrad::models::Norm::Batch;  ///< the normalised arm
  double target_loss = 0.1;  ///< convergence speed: epochs until the train loss <= this
  int threads = 1;           ///< runs trained at the same time
};

/// The experiment names, in `all` order.
const std::vector<std::string>& experiment_names();

/// One net on one seed within one experiment.
struct Job {
  std::string experiment;  ///< "convergence", "learning-rate", "depth"
  std::string config;      ///< e.g. "batch_lr0.01_d4"
  RunConfig run;
};

/// Resolved settings (preset applied). Throws std::invalid_argument for an unknown preset,
/// seeds < 1, threads < 1 or an empty lr list.
struct Resolved {
  std::string preset;
  std::vector<double> lrs;
  std::optional<double> grad_clip, act_clip;
  bool plain_depth_grad_clip = true;  ///< false in the chapter preset (its depth code)
  std::vector<EvalPolicy> policies;
};
Resolved resolve(const StudyOptions& o);

/// Every run of `experiment` (configs in order, seeds innermost).
std::vector<Job> make_jobs(const std::string& experiment, const StudyOptions& o);

/// Results of a study, aligned with `jobs`.
struct StudyResult {
  StudyOptions options;
  Resolved resolved;
  std::vector<Job> jobs;
  std::vector<RunResult> results;
};

/// Trains every job (identical runs shared between experiments are trained once), on
/// `options.threads` threads, each run single-threaded inside (so the results are the same
/// bits for any thread count); each run logs one progress line at info level.
StudyResult run_study(const std::vector<std::string>& experiments, const StudyOptions& options);

/// File name of a job's trained net: "<experiment>_<config>_seed<k>.safetensors".
std::string checkpoint_name(const Job& job);
/// Saves every trained net (parameters and BN buffers, layers/checkpoint.h) into `dir`
/// (created if missing). Returns the paths. Throws std::runtime_error when a file cannot
/// be written.
std::vector<std::string> save_models(const StudyResult& s, const std::string& dir);

/// "0.01" style numbers for labels and CSV: "%g" (kit/option_checks.h).
using studies::kit::fmt_g;

}  // namespace bnexp
