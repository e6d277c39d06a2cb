#pragma once
// What the Fashion-MNIST training studies' options share: the seeds, the data subset and the
// worker threads (base structs with the studies' usual defaults), their check and their --quick
// sizes. The templates take a study's options struct, which has seeds, epochs, train_size,
// test_size and threads, and may have batch and lr (each checked when present).
#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/option_checks.h"

namespace studies::kit {

/// The seeds and workers of a grid of runs: each cell runs once per seed, seed + k for
/// k = 0 .. seeds - 1, on `threads` single-threaded workers (run_grid).
struct SeedOptions {
  int seeds = 3;
  std::uint64_t seed = 0;  ///< the first seed
  int threads = 2;
};

/// Which net a run of a BatchNorm-vs-plain grid trains and with which seed; a study's run
/// derives from it and adds its cell and its outcome.
struct BnVsPlainRun {
  bool bn = false;  ///< BatchNorm after each hidden layer, else plain
  std::uint64_t seed = 0;
};

/// Appends `cell` to `runs` once per seed of `o` (o.seed, o.seed + 1, ...): a grid's cell is
/// run for every seed, in seed order.
template <class Run>
void add_seed_runs(std::vector<Run>& runs, Run cell, const SeedOptions& o) {
  for (int k = 0; k < o.seeds; ++k) {
    cell.seed = o.seed + static_cast<std::uint64_t>(k);
    runs.push_back(cell);
  }
}

/// "0..2": the seeds of `o`, for a summary.
std::string seed_range(const SeedOptions& o);

/// SeedOptions on a Fashion-MNIST subset (load_data): the first train_size training images
/// and test_size test images. A study's options derive from it and add its epochs, batch, lr.
struct FashionGridOptions : SeedOptions {
  std::int64_t train_size = 10000;
  std::int64_t test_size = 0;  ///< 0: all 10,000
};

/// --seeds >= 1, --epochs >= 1, --batch (check_batch) and --lr (check_rate) when the struct
/// has them, --train-size/--test-size (check_sizes), --threads (check_threads), in that
/// order. Throws std::invalid_argument naming the first option out of range.
template <class O>
void check_training_options(const O& o) {
  check_seeds(o.seed, o.seeds);
  check_at_least("--epochs", o.epochs, 1);
  if constexpr (requires { { o.batch } -> std::convertible_to<std::int64_t>; }) check_batch(o.batch, o.train_size);
  if constexpr (requires { { o.lr } -> std::convertible_to<double>; }) check_rate("--lr", o.lr);
  check_sizes(o.train_size, o.test_size);
  check_threads(o.threads);
}

/// A --quick run's size: seeds, epochs, training and test images (0: all 10,000).
struct QuickSize {
  int seeds = 1, epochs = 1;
  std::int64_t train_size = 1024, test_size = 1000;
};
/// `o` with q's seeds, epochs and sizes.
template <class O>
O with_quick_size(O o, const QuickSize& q) {
  o.seeds = q.seeds;
  o.epochs = q.epochs;
  o.train_size = q.train_size;
  o.test_size = q.test_size;
  return o;
}

/// "784-256-128-10": the layer widths of the Fashion-MNIST MLP with `hidden` widths (784
/// pixels in, 10 classes out), for a summary.
std::string mlp_layers(const std::vector<std::int64_t>& hidden);

}  // namespace studies::kit
