#pragma once
// What the Fashion-MNIST training studies' options share: their check and their --quick
// sizes. Templates over a study's options struct, which has seeds, epochs, train_size,
// test_size and threads, and may have batch and lr (each checked when present).
#include <concepts>
#include <cstdint>

#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/option_checks.h"

namespace studies::kit {

/// --seeds >= 1, --epochs >= 1, --batch (check_batch) and --lr (check_rate) when the struct
/// has them, --train-size/--test-size (check_sizes), --threads (check_threads), in that
/// order. Throws std::invalid_argument naming the first option out of range.
template <class O>
void check_training_options(const O& o) {
  check_at_least("--seeds", o.seeds, 1);
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

}  // namespace studies::kit
