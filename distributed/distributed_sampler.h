#pragma once
// DistributedSampler: each rank's share of a dataset's indices, as PyTorch's
// torch.utils.data.DistributedSampler; a data::Sampler, so a DataLoader takes it
// (DataLoaderOptions::sampler) and each rank batches, decodes and prefetches its share only.
#include <cstdint>
#include <optional>
#include <vector>

#include <tapegrad/data/sampler.h>

namespace tapegrad::distributed {

/// How DistributedSampler orders and splits the indices (PyTorch's defaults).
struct DistributedSamplerOptions {
  bool shuffle = true;     ///< permute the indices each epoch (seed + epoch)
  std::uint64_t seed = 0;  ///< must be the same on every rank
  /// false: pad the permuted list by repeating its head until it divides evenly (every
  /// rank gets ceil(N/R) indices; some samples are seen twice per epoch); true: drop the
  /// tail so every rank gets floor(N/R).
  bool drop_last = false;
};

/// Splits 0..dataset_size-1 into num_replicas disjoint, equal-sized strided shards:
/// rank r takes positions r, r + R, r + 2R, ... of the epoch's (padded or truncated)
/// order. Together the ranks cover every index exactly once per epoch when N % R = 0.
/// The permutation is a Fisher-Yates shuffle with tapegrad's Generator seeded with
/// seed + epoch (so it is not PyTorch's torch.randperm order, but it is the same on every
/// rank and every run). Throws std::invalid_argument for num_replicas < 1, a rank outside
/// [0, num_replicas), or drop_last with fewer samples than replicas.
///
/// As a DataLoader's sampler (its shuffle left false) the loader's size() is num_samples()
/// and its batch_size is per rank: `DataLoader(ds, {.batch_size = B / R, .sampler =
/// std::make_shared<DistributedSampler>(ds.size(), R, rank)}, gen)`, then
/// loader.set_epoch(e) before each epoch's reset() (train::fit does both).
class DistributedSampler : public data::Sampler {
 public:
  /// Shards `dataset_size` indices over `num_replicas` ranks for `rank`; throws as the
  /// class description says.
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options = {});
  /// Sets the epoch that seeds the next indices() (call at the start of every epoch,
  /// with the same value on every rank, or each epoch repeats the same order).
  void set_epoch(std::int64_t epoch) override { epoch_ = epoch; }
  /// The epoch set by set_epoch() (0 initially).
  std::int64_t epoch() const { return epoch_; }
  /// This rank's indices for the current epoch (num_samples() of them).
  std::vector<std::int64_t> indices() const;
  /// Indices per rank per epoch: ceil(N/R), or floor(N/R) with drop_last.
  std::int64_t num_samples() const { return num_samples_; }
  /// num_samples() · num_replicas.
  std::int64_t total_size() const { return num_samples_ * replicas_; }

  /// data::Sampler: num_samples().
  std::int64_t size() const override { return num_samples_; }
  /// data::Sampler: indices() of the current epoch.
  std::vector<std::int64_t> epoch_indices() override { return indices(); }
  /// data::Sampler: the dataset_size it was made for (a loader over another size throws).
  std::optional<std::int64_t> dataset_size() const override { return n_; }
  /// data::Sampler: num_replicas R.
  int num_replicas() const override { return replicas_; }
  /// data::Sampler: this rank.
  int rank() const override { return rank_; }

 private:
  std::int64_t n_;
  int replicas_, rank_;
  DistributedSamplerOptions options_;
  std::int64_t num_samples_ = 0;
  std::int64_t epoch_ = 0;
};

}  // namespace tapegrad::distributed
