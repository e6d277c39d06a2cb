#pragma once
// Sampler: where a DataLoader's index order comes from, epoch by epoch (PyTorch's
// torch.utils.data.Sampler, the DataLoader's `sampler=` argument). The loader's own order is
// one of the two defaults below (SequentialSampler, or RandomSampler with shuffle = true);
// distributed::DistributedSampler gives each rank its share of the dataset.
#include <cstdint>
#include <optional>
#include <vector>

#include <tapegrad/core/random.h>

namespace tapegrad::data {

/// A source of sample indices, one list per epoch. DataLoader::reset() asks for the next
/// epoch's list once (epoch_indices()) and batches it in order; DataLoader::set_epoch()
/// forwards to set_epoch(). A sampler may be shared by copies of a loader.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Indices per epoch (what the loader batches: its size()).
  virtual std::int64_t size() const = 0;
  /// The next epoch's indices: size() of them, each in [0, N) of the loader's dataset (the
  /// loader throws otherwise). Not const: a random sampler draws them from its generator.
  virtual std::vector<std::int64_t> epoch_indices() = 0;
  /// Sets the epoch the next epoch_indices() belong to (a sampler whose order depends on it
  /// reshuffles). Default: ignored.
  virtual void set_epoch(std::int64_t /*epoch*/) {}
  /// The dataset size N the sampler was made for, when it knows it: the loader refuses a
  /// dataset of another size. Default: unknown (nullopt).
  virtual std::optional<std::int64_t> dataset_size() const { return std::nullopt; }
  /// Into how many disjoint shares the dataset is split across ranks (1, the default: this
  /// sampler gives the whole dataset; distributed::DistributedSampler: its num_replicas).
  virtual int num_replicas() const { return 1; }
  /// Which share this sampler gives, in [0, num_replicas()) (default 0).
  virtual int rank() const { return 0; }
};

/// 0, 1, ..., N-1 every epoch (PyTorch's SequentialSampler; the loader's default order).
class SequentialSampler : public Sampler {
 public:
  /// Over N = `n` indices; throws std::invalid_argument for n < 0.
  explicit SequentialSampler(std::int64_t n);
  /// N.
  std::int64_t size() const override { return n_; }
  /// 0 .. N-1.
  std::vector<std::int64_t> epoch_indices() override;
  /// N.
  std::optional<std::int64_t> dataset_size() const override { return n_; }

 private:
  std::int64_t n_;
};

/// A fresh permutation of 0..N-1 every epoch, randperm(N, gen) (PyTorch's RandomSampler
/// without replacement; the loader's order with shuffle = true). Restoring the generator's
/// state restores the next epoch's order; set_epoch is ignored.
class RandomSampler : public Sampler {
 public:
  /// Over N = `n` indices, drawing from `gen` (kept by reference: it must outlive the
  /// sampler); throws std::invalid_argument for n < 0.
  RandomSampler(std::int64_t n, Generator& gen);
  /// N.
  std::int64_t size() const override { return n_; }
  /// randperm(N, gen) (data/dataset.h), drawn from the generator.
  std::vector<std::int64_t> epoch_indices() override;
  /// N.
  std::optional<std::int64_t> dataset_size() const override { return n_; }

 private:
  std::int64_t n_;
  Generator* gen_;
};

}  // namespace tapegrad::data
