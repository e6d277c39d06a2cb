#pragma once
// One epoch of the chapter's minibatch SGD on MSE: the loop every chapter training runs
// (studies::kit::train_run, studies::kit::train_regression, the benchmarks' chapter workload).
#include <cstdint>
#include <optional>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/sgd.h>

namespace studies::kit {

/// Fisher–Yates with `gen`: order becomes a permutation of 0..n-1 (n = order.size()),
/// swapping i with gen.randint(i + 1) for i = n-1 down to 1.
void shuffle_order(std::vector<std::int64_t>& order, tapegrad::Generator& gen);

struct EpochOptions {
  std::int64_t batch = 32;
  bool drop_last = true;           ///< drop the remainder of the epoch (else it is a last, smaller batch)
  std::int64_t min_batch = 1;      ///< skip batches with fewer rows (BatchNorm refuses 1 in training)
  std::optional<double> grad_clip;  ///< clamp every gradient element to [-c, c] before the step
  bool stop_on_crash = false;      ///< a crash loss (is_crash_loss) ends the epoch before its step
};

struct EpochStats {
  double loss_sum = 0;            ///< sum of the minibatch losses of the steps taken
  int steps = 0;                  ///< SGD steps taken
  bool crashed = false;           ///< stop_on_crash only: a minibatch loss was a crash
  std::int64_t crash_step = 0;    ///< 1-based batch index of the crash
  double crash_loss = 0;
};

/// Trains `net` for one epoch: rows of (x, y) in `order`, batches of options.batch, each
/// batch: MSE of net(xb) against yb, zero_grad, backward, optional gradient clamp, sgd.step().
/// x (n, F) and y (n, K), any float dtype, contiguous; order holds row indices of x.
EpochStats sgd_epoch(tapegrad::layers::Module& net, tapegrad::optim::SGD& sgd, const tapegrad::Tensor& x,
                     const tapegrad::Tensor& y, const std::vector<std::int64_t>& order, const EpochOptions& options);

}  // namespace studies::kit
