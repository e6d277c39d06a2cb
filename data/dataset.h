#pragma once
// In-memory supervised datasets: features X (N, D) float32 and class labels y (N) int64.
#include <cstdint>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::data {

/// X (N, D) float32, y (N) int64. Tensors are owned (no graph history).
struct Dataset {
  Tensor X;
  Tensor y;

  /// Validates the pair: X 2-d float32, y 1-d int64, same N. Throws std::invalid_argument
  /// naming both shapes/dtypes otherwise.
  static Dataset make(Tensor X, Tensor y);

  std::int64_t size() const { return X.defined() ? X.size(0) : 0; }
  std::int64_t num_features() const { return X.defined() ? X.size(1) : 0; }
  /// Rows [begin, end) copied into a new dataset. Throws std::out_of_range.
  Dataset slice(std::int64_t begin, std::int64_t end) const;
  /// The rows at `indices`, in that order, copied. Throws std::out_of_range naming the
  /// first bad index.
  Dataset take(const std::vector<std::int64_t>& indices) const;
  /// Number of classes: max label + 1 (0 for an empty set).
  std::int64_t num_classes() const;
};

/// A uniformly random permutation of [0, n), drawn from `gen` (Fisher–Yates with
/// gen.randint), so the same generator state gives the same permutation.
std::vector<std::int64_t> randperm(std::int64_t n, Generator& gen);

/// Training and held-out validation parts of one dataset.
struct TrainValSplit {
  Dataset train;
  Dataset val;
};

/// Holds out `val_size` random rows (like torch.utils.data.random_split): one permutation
/// from `gen`; its first N - val_size rows, sorted, form the training part, the rest the
/// validation part. Throws std::invalid_argument unless 0 <= val_size <= N.
TrainValSplit train_val_split(const Dataset& full, std::int64_t val_size, Generator& gen);

/// Standardisation x' = (x - mean) / std with statistics fitted on the training split only
/// (fitting on validation or test data leaks them into training).
/// Global (default): one mean and one population std over every value of X, as
/// torchvision's Normalize((0.2860,), (0.3530,)) for Fashion-MNIST.
/// Per-feature: a mean and std per column; a column with std < 1e-6 (constant border
/// pixels) keeps std = 1, so it maps to 0 instead of dividing by zero.
class Standardizer {
 public:
  /// Computes the statistics in float64. Throws std::invalid_argument for an empty set.
  static Standardizer fit(const Tensor& X, bool per_feature = false);
  /// A Standardizer with given statistics (e.g. read from a checkpoint): `mean` and `std`
  /// of size 1 (global) or `features`. Throws std::invalid_argument for other sizes,
  /// features < 1, or a std that is not finite and > 0, naming the value.
  static Standardizer from_stats(std::int64_t features, std::vector<double> mean, std::vector<double> std);
  /// Returns a standardised float32 copy; throws std::invalid_argument naming the
  /// shapes when D differs from the fitted one.
  Tensor transform(const Tensor& X) const;
  /// transform() on a dataset's X, labels shared.
  Dataset transform(const Dataset& d) const;

  bool per_feature() const { return mean_.size() > 1; }
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& stddev() const { return std_; }

 private:
  std::int64_t features_ = 0;
  std::vector<double> mean_;  ///< size 1 (global) or D
  std::vector<double> std_;
};

}  // namespace tapegrad::data
