#pragma once
// `norm_study batch-size`: test accuracy against the per-replica batch m for every
// normalisation, with R virtual replicas (global batch R·m).
#include <cstdint>
#include <string>
#include <vector>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include "kit/training_options.h"
#include <tapegrad/data/dataloader.h>

namespace normstudy {

using namespace studies::kit;  // the kit's data, nets, job runner, checks and formats

struct BatchSizeOptions : studies::kit::FashionGridOptions {
  BatchSizeOptions() { train_size = 20000; }  ///< a random training subset (fixed across runs) of 20,000
  std::vector<std::int64_t> ms = {2, 4, 8, 16, 32, 64};  ///< per-replica batch sizes
  std::vector<NormKind> kinds = all_kinds();
  int replicas = 4;                  ///< R
  int epochs = 3;                    ///< the same samples seen for every m and norm
  double base_lr = 0.1;              ///< lr = base_lr · (R·m) / ref_batch (linear scaling)
  std::int64_t ref_batch = 256;
  double sgd_momentum = 0.9;
  double bn_momentum = 0.1;
  std::vector<std::int64_t> hidden = {256, 128};   ///< mlp
  std::vector<std::int64_t> channels = {8, 16};    ///< cnn: conv widths
  std::int64_t head = 64;                          ///< cnn: hidden width of the head
  std::int64_t groups = 32;                        ///< GroupNorm groups
  std::string model = "mlp";                       ///< "mlp" or "cnn"
  std::string data_dir;
  bool mpi_ranks = false;  ///< set by run_batch_size_ranks: the replicas ran as MPI ranks
};

struct BatchSizeRun {
  NormKind kind;
  std::int64_t m = 0;
  std::uint64_t seed = 0;
  double lr = 0;
  bool crashed = false;
  double train_loss = 0;  ///< mean minibatch loss of the last epoch
  double test_loss = 0, test_accuracy = 0;  ///< eval mode
  double seconds = 0;     ///< wall time of the run (not in the CSV)
};

/// runs: kind-major, then m, then seed.
using BatchSizeResult = studies::kit::GridResult<BatchSizeOptions, BatchSizeRun>;

/// The CNN's defaults (model "cnn"; see the README for the protocol): o with model = "cnn"
/// and every field not named in `keep` (CLI option names such as "--epochs") replaced.
BatchSizeOptions with_cnn_defaults(BatchSizeOptions o, const std::vector<std::string>& keep = {});

/// Linear scaling (Goyal et al. 2017): base_lr · R·m / ref_batch.
double scaled_lr(const BatchSizeOptions& o, std::int64_t m);

/// Checks every option before any data is read: replicas, seeds and epochs >= 1, model mlp
/// or cnn, a non-empty --ms with every m >= 2, --train-size >= 1, --test-size in
/// [0, 10000], --base-lr finite > 0, --ref-batch >= 1, --bn-momentum in [0, 1], widths and
/// groups >= 1, --threads >= 1. Throws std::invalid_argument naming the flag and the value.
void check_batch_size_options(const BatchSizeOptions& o);
/// The same, and R·m at most the training images of `d`.
void check_batch_size_options(const BatchSizeOptions& o, const StudyData& d);

/// A run's model settings from the options: norm `kind`, with per-replica statistics over
/// `replicas` sub-batches (the in-process run: o.replicas; a rank that is one replica: 1).
ModelConfig run_model_config(const BatchSizeOptions& o, NormKind kind, int replicas);

/// A run's global batches: R·m rows (R = o.replicas), shuffled, drop_last. The shuffle's
/// generator is seeded with run_shuffle_seed(seed), the same on every rank.
tapegrad::data::DataLoaderOptions run_loader_options(const BatchSizeOptions& o, std::int64_t m);
std::uint64_t run_shuffle_seed(std::uint64_t seed);

/// The runs to train with their cells set (kind, m, seed): kind-major, then m, then seed,
/// BatchSizeResult's order.
std::vector<BatchSizeRun> batch_size_grid(const BatchSizeOptions& o);

/// Scores a trained run on `test` in eval mode. A crashed run gets NaN losses and accuracy;
/// a test loss that is not finite (or above 1e10) marks the run crashed.
void score_run(BatchSizeRun& r, tapegrad::layers::Module& net, const tapegrad::data::Dataset& test);

/// Trains every (kind, m, seed) on `threads` workers. Throws std::invalid_argument for bad
/// options (naming them).
BatchSizeResult run_batch_size(const BatchSizeOptions& o, const StudyData& data);

/// Tidy CSV (no timings: the same options give byte-identical text for any --threads).
std::string batch_size_csv(const BatchSizeResult& r);
/// Markdown: settings, accuracy table (mean ± std, crashed), the chapter's claims as
/// paired differences over seeds.
std::string batch_size_summary(const BatchSizeResult& r);
/// results.csv, summary.md and accuracy_vs_m.png (when gnuplot is there) in dir.
std::vector<std::string> write_batch_size(const BatchSizeResult& r, const std::string& dir);

}  // namespace normstudy
