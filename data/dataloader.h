#pragma once
// DataLoader: mini-batches over a Dataset, PyTorch's torch.utils.data.DataLoader for
// in-memory tensors (batch_size, shuffle with a seeded generator, drop_last).
#include <cstdint>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataset.h>

namespace tapegrad::data {

/// How a DataLoader batches: batch size, shuffling, the last partial batch.
struct DataLoaderOptions {
  /// Samples per batch B, >= 1 (default 64).
  std::int64_t batch_size = 64;
  /// Draw a new random order each epoch from the loader's generator (default false: 0..N-1).
  bool shuffle = false;
  /// Drop the last batch when it is smaller than batch_size (a batch of one sample
  /// breaks BatchNorm's training mode).
  bool drop_last = false;
};

/// One mini-batch in the dataset's shapes (copies): X (B, *) float32 ((B, D) rows,
/// (B, C, H, W) images), y (B) int64 class indices or float32 (B) / (B, k) targets.
struct Batch {
  /// Inputs (B, *).
  Tensor X;
  /// Targets (B) or (B, k).
  Tensor y;
  /// B, the number of samples in this batch.
  std::int64_t size() const { return X.size(0); }
};

/// Iterates a dataset in mini-batches. Each epoch (each call of begin(), i.e. each
/// range-for over the loader) draws a fresh order from the generator when shuffle is on,
/// exactly as PyTorch draws one randperm per epoch: restoring the generator's state
/// therefore restores the next epoch's order. The loader keeps a reference to the
/// generator and a copy of the dataset handles.
/// Throws std::invalid_argument for batch_size < 1.
class DataLoader {
 public:
  /// Batches `dataset` with `options`, shuffling with `gen` (kept by reference: it must
  /// outlive the loader). Throws std::invalid_argument for batch_size < 1.
  DataLoader(Dataset dataset, DataLoaderOptions options, Generator& gen = default_generator());

  /// Batches per epoch: ceil(N / B), or floor(N / B) with drop_last.
  std::int64_t num_batches() const;
  /// The dataset being batched.
  const Dataset& dataset() const { return dataset_; }
  /// The options given at construction.
  const DataLoaderOptions& options() const { return options_; }

  /// Starts an epoch: draws the order (shuffle) or resets it to 0..N-1.
  void reset();
  /// Batch i of the current epoch (0 <= i < num_batches()); throws std::out_of_range.
  Batch batch(std::int64_t i) const;
  /// Rows [row_begin, row_begin + rows) of batch i only, gathering nothing else: a rank's
  /// share of a global batch in data-parallel training (every rank draws the same order).
  /// Throws std::out_of_range for a bad i or a row range outside the batch.
  Batch batch(std::int64_t i, std::int64_t row_begin, std::int64_t rows) const;
  /// The current epoch's sample order.
  const std::vector<std::int64_t>& order() const { return order_; }

  /// Input iterator over the batches of the current epoch (what range-for uses).
  class iterator {
   public:
    /// Points at batch i of `loader`.
    iterator(const DataLoader* loader, std::int64_t i) : loader_(loader), i_(i) {}
    /// The current batch (a copy, built on each call).
    Batch operator*() const { return loader_->batch(i_); }
    /// Moves to the next batch.
    iterator& operator++() {
      ++i_;
      return *this;
    }
    /// Whether the two point at different batches.
    bool operator!=(const iterator& o) const { return i_ != o.i_; }
    /// Whether the two point at the same batch.
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const DataLoader* loader_;
    std::int64_t i_;
  };
  /// reset(), then the first batch.
  iterator begin();
  /// Past the last batch (num_batches()).
  iterator end() const { return iterator(this, num_batches()); }

 private:
  Dataset dataset_;
  DataLoaderOptions options_;
  Generator* gen_;
  std::vector<std::int64_t> order_;
};

}  // namespace tapegrad::data
