#pragma once
// What the trainer needs from a data-parallel runtime, without depending on one: the
// MPI implementation is in mpi_glue.{h,cpp} (built only with tapegrad_distributed).
// With Config::parallel unset, train() is the single-process trainer.
#include <cstdint>
#include <memory>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/module.h>

namespace fmnist {

/// Every rank runs train() on the same data and seed: each global batch (--batch-size) is
/// drawn identically on every rank (the same shuffled order) and rank r gathers and trains
/// on its rows [r·B/R, (r+1)·B/R) only, so the per-rank batch is B/R and, with
/// SyncBatchNorm, the run is the single-process run at batch B. Validation and test
/// evaluation are split across the ranks (evaluation.h) with the single-process result.
/// Checkpoints are written by rank 0 only (then a barrier); resume loads the same file on
/// every rank.
class DataParallel {
 public:
  virtual ~DataParallel() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Called once with the freshly built model, before the optimizer is made: may swap its
  /// BatchNorm layers (--sync-bn) and wraps it for gradient averaging.
  virtual void prepare(std::shared_ptr<tapegrad::layers::Module> model) = 0;
  /// The model's forward on this rank's rows (train mode).
  virtual tapegrad::Tensor forward(const tapegrad::Tensor& x) = 0;
  /// After loss.backward(), before optimizer.step(): completes the gradient averaging.
  virtual void after_backward() = 0;
  /// Mean of `value` over ranks.
  virtual double mean(double value) = 0;
  /// Elementwise sums over ranks of n values, in place (every rank gets the totals).
  virtual void sum(double* values, std::int64_t n) = 0;
  virtual void sum(std::int64_t* values, std::int64_t n) = 0;
  virtual void barrier() = 0;
};

}  // namespace fmnist
