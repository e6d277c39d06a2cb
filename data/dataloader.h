#pragma once
// DataLoader: mini-batches over a Dataset, PyTorch's torch.utils.data.DataLoader for
// in-memory tensors (batch_size, shuffle with a seeded generator, drop_last), or over a
// SampleSource whose samples are produced on demand (an ImageFolder decoding files), with
// per-sample transforms (augmentation), worker threads that prepare the next batches
// while the caller trains on the current one, and an optional Sampler giving the index
// order per epoch (data/sampler.h; e.g. distributed::DistributedSampler, a rank's share).
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/data/sample_source.h>
#include <tapegrad/data/sampler.h>
#include <tapegrad/data/transforms.h>

namespace tapegrad::data {

/// How a DataLoader batches: batch size, shuffling, the last partial batch.
struct DataLoaderOptions {
  /// Samples per batch B, >= 1 (default 64).
  std::int64_t batch_size = 64;
  /// Draw a new random order each epoch from the loader's generator (default false: 0..N-1).
  /// Mutually exclusive with `sampler`, as in PyTorch.
  bool shuffle = false;
  /// Drop the last batch when it is smaller than batch_size (a batch of one sample
  /// breaks BatchNorm's training mode).
  bool drop_last = false;
  /// Applied to every sample (C, H, W) as a batch is built, with the sample's own generator
  /// sample_generator(epoch seed, 0, dataset index); the epoch seed is one next_u64() of
  /// the loader's generator at each reset() (after the order), as PyTorch's base_seed, so
  /// the epoch enters through it and a run resumed from a restored generator augments as
  /// the uninterrupted one. Empty (the default): samples as stored, nothing drawn for them.
  /// With num_workers > 0 the transforms run on the worker threads, several at once: they
  /// must be safe to call concurrently (the transforms of data/transforms.h are).
  Compose transform{};
  /// Threads preparing batches ahead of the caller (PyTorch's num_workers); 0 (the
  /// default): each batch is built by the call that asks for it. The batches are the same,
  /// bit for bit, for any number of workers.
  std::int64_t num_workers = 0;
  /// Batches prepared ahead per worker, the bound of the queue (PyTorch's prefetch_factor;
  /// default 2, >= 1).
  std::int64_t prefetch_factor = 2;
  /// Where each epoch's index order comes from (PyTorch's sampler=): reset() takes the
  /// sampler's epoch_indices() and batches them in order, so size() is the sampler's size()
  /// (with distributed::DistributedSampler: this rank's share, batch_size per rank). Shared,
  /// not copied, by copies of the loader; with shuffle = true the constructor throws. Null
  /// (the default): the loader's own order, RandomSampler(N, gen) with shuffle, else
  /// SequentialSampler(N).
  std::shared_ptr<Sampler> sampler{};
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
/// therefore restores the next epoch's order (and, with a transform, its augmentation).
/// The loader keeps a reference to the generator and a copy of the dataset handles.
/// With a sampler (DataLoaderOptions::sampler) the order is the sampler's instead, asked
/// once per reset(); the transform's epoch seed is still drawn from the generator, and
/// no batch exists before the first reset().
///
/// With num_workers > 0, reset() starts the workers on the epoch's batches in order; they
/// keep at most num_workers · prefetch_factor finished batches ahead of the caller.
/// batch(i) for the next batch in order takes it from them (waiting if needed) and
/// rethrows, on the caller's thread, an exception a worker met building it; other calls
/// (a batch asked twice, out of order, or a row range) build it on the calling thread.
/// The next reset() and the destructor stop and join the workers, mid-epoch too.
/// Copies share the dataset and options, not the workers.
class DataLoader {
 public:
  /// Batches `dataset` with `options`, shuffling with `gen` (kept by reference: it must
  /// outlive the loader). Throws std::invalid_argument for batch_size < 1, num_workers < 0,
  /// prefetch_factor < 1, a transform with a dataset that is not images (N, C, H, W), shuffle
  /// together with a sampler, or a sampler made for another dataset size than N.
  DataLoader(Dataset dataset, DataLoaderOptions options, Generator& gen = default_generator());
  /// Batches the samples of `source` (kept alive by the loader) as (B, C, H, W) float32 and
  /// (B) int64 targets. Throws as above, and std::invalid_argument for a null source.
  DataLoader(std::shared_ptr<const SampleSource> source, DataLoaderOptions options,
             Generator& gen = default_generator());
  /// Stops and joins the workers.
  ~DataLoader();
  /// A loader over the same data, options and generator, its workers not started.
  DataLoader(const DataLoader& other);
  /// As the copy constructor (this loader's workers are stopped first).
  DataLoader& operator=(const DataLoader& other);

  /// Batches per epoch: ceil(size() / B), or floor(size() / B) with drop_last.
  std::int64_t num_batches() const;
  /// Samples per epoch: the sampler's size() (N without a sampler).
  std::int64_t size() const;
  /// N, the number of samples of the dataset or source.
  std::int64_t dataset_size() const;
  /// The dataset being batched (an empty one for a SampleSource loader).
  const Dataset& dataset() const { return dataset_; }
  /// The sample source being batched, or nullptr for an in-memory Dataset.
  const SampleSource* source() const { return source_.get(); }
  /// The options given at construction.
  const DataLoaderOptions& options() const { return options_; }

  /// The sampler giving the order: the one given in the options, or the loader's own.
  Sampler& sampler() const { return *sampler_; }
  /// Forwards to sampler().set_epoch(epoch) (PyTorch's DistributedSampler.set_epoch): call
  /// before reset() each epoch, with the same value on every rank; train::fit calls it with
  /// epoch - 1 (0 first). Without a sampler it changes nothing.
  void set_epoch(std::int64_t epoch) { sampler_->set_epoch(epoch); }

  /// Starts an epoch: stops the workers, takes the order from the sampler (a permutation
  /// drawn from the generator with shuffle, 0..N-1 without), draws the epoch seed (with a
  /// transform), starts the workers (num_workers > 0). With a given sampler, throws
  /// std::out_of_range for an index outside 0 .. N-1 and std::logic_error for a count other
  /// than its size(); the previous order is then kept.
  void reset();
  /// Batch i of the current epoch (0 <= i < num_batches()); throws std::out_of_range, and
  /// what building the batch threw (a file that cannot be decoded, a transform's error);
  /// std::logic_error before the first reset() with a sampler.
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
  struct Workers;  // the prefetching threads (prefetch.cpp)
  void check_options() const;
  void init_sampler();                                     ///< the given sampler, or the loader's own
  void check_batch(std::int64_t i) const;  ///< i in range, an epoch started
  std::int64_t batch_rows(std::int64_t i) const;  ///< rows of batch i
  // Rows [row_begin, row_begin + rows) of batch i, built on the calling thread.
  Batch build(std::int64_t i, std::int64_t row_begin, std::int64_t rows) const;
  void start_workers();
  void stop_workers() const;
  // Batch i from the workers when it is the next in order (nullopt otherwise).
  std::optional<Batch> take_prefetched(std::int64_t i) const;

  Dataset dataset_;
  std::shared_ptr<const SampleSource> source_;
  DataLoaderOptions options_;
  Generator* gen_;
  std::shared_ptr<Sampler> sampler_;
  std::vector<std::int64_t> order_;
  std::uint64_t epoch_seed_ = 0;
  mutable std::shared_ptr<Workers> workers_;  // never shared: shared_ptr for its type-erased deleter
};

}  // namespace tapegrad::data
