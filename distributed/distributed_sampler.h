#pragma once
// DistributedSampler: each rank's share of a dataset's indices, as PyTorch's
// torch.utils.data.DistributedSampler.
#include <cstdint>
#include <vector>

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
class DistributedSampler {
 public:
  /// Shards `dataset_size` indices over `num_replicas` ranks for `rank`; throws as the
  /// class description says.
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options = {});
  /// Sets the epoch that seeds the next indices() (call at the start of every epoch,
  /// with the same value on every rank, or each epoch repeats the same order).
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  /// The epoch set by set_epoch() (0 initially).
  std::int64_t epoch() const { return epoch_; }
  /// This rank's indices for the current epoch (num_samples() of them).
  std::vector<std::int64_t> indices() const;
  /// Indices per rank per epoch: ceil(N/R), or floor(N/R) with drop_last.
  std::int64_t num_samples() const { return num_samples_; }
  /// num_samples() · num_replicas.
  std::int64_t total_size() const { return num_samples_ * replicas_; }

 private:
  std::int64_t n_;
  int replicas_, rank_;
  DistributedSamplerOptions options_;
  std::int64_t num_samples_ = 0;
  std::int64_t epoch_ = 0;
};

}  // namespace tapegrad::distributed
