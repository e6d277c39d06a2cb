#pragma once
// batch_dependence: the test for "inference depends on batch companions".
#include <cstdint>
#include <string>

#include <tapegrad/layers/module.h>

namespace tapegrad::debug {

/// How batch_dependence() probes a model: which samples, how many other batches, from where.
struct BatchDependenceOptions {
  std::int64_t max_samples = 16;  ///< samples i checked: the first min(N, max_samples) rows of x
  std::int64_t trials = 8;        ///< other batches per sample
  /// Companions per other batch. -1: N/2 when they come from x itself (N - 1 would only
  /// permute x), N - 1 from a separate pool (capped by its size). Must be >= 1.
  std::int64_t companions = -1;
  bool try_alone = true;  ///< also run each sample as a batch of one
  /// Rows to draw companions from (same trailing shape as x). Undefined = the other rows of x.
  Tensor pool;
  std::uint64_t seed = 0;  ///< companions and positions are drawn from Generator(seed)
};

/// How much a sample's output changed with the other samples of its batch.
struct BatchDependenceResult {
  /// max over samples i and all other batches (and the batch of one, when it ran) of
  /// max |output of i there - output of i in x|.
  double max_abs_diff = 0;
  double companions_max_abs_diff = 0;  ///< the same, over the other batches only
  double alone_max_abs_diff = 0;       ///< the same, over the batches of one; NaN if refused
  bool alone_refused = false;          ///< the model threw on a batch of one (BatchNorm in train mode)
  std::string alone_error;             ///< its message
  ///@{
  /// Samples checked and other batches per sample, as run.
  std::int64_t samples = 0, trials = 0;
  ///@}
  /// max_abs_diff > tol (default: a float32-rounding allowance).
  bool depends(double tol = 1e-4) const { return max_abs_diff > tol; }
};

/// How much a sample's output depends on the other samples of its batch. For each of the
/// first max_samples rows i of x (N, ...), compares the output row i of model(x) with the
/// output of the same sample run alone (a batch of one) and inside `trials` other batches
/// (i at a random position among random companions). In eval mode this is zero up to
/// rounding (a few 1e-7 in float32, from BLAS blocking); in train mode a BatchNorm makes it
/// positive, and the batch of one is refused (recorded in alone_refused / alone_error)
/// because every output would collapse to β. Dropout in train mode also makes it positive
/// (random masks).
/// Side effects: none. The forwards run under NoGradGuard and AuditPause, and every buffer
/// (running_mean, running_var, num_batches_tracked) is saved before and restored after, so
/// measuring in train mode does not corrupt the running statistics; the mode is not changed.
/// (A Dropout in train mode still draws its masks from its generator.)
/// Throws std::invalid_argument for N < 1, companions < 1, or a pool whose trailing shape differs
/// (naming both shapes), and rethrows any error of model(x) itself.
BatchDependenceResult batch_dependence(layers::Module& model, const Tensor& x, BatchDependenceOptions options = {});

}  // namespace tapegrad::debug
