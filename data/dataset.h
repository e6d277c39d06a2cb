#pragma once
// In-memory supervised datasets: features X (N, *) float32 of any rank and targets y that
// are class indices (N) int64 or float targets (N) / (N, k) float32.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::data {

/// Features and targets of N samples. Tensors are owned (no graph history).
///   X  float32 (N, *): rows (N, D), images (N, C, H, W), any rank >= 1;
///   y  int64 (N): class indices (classification, e.g. for cross_entropy), or
///      float32 (N) or (N, k): regression targets.
/// Built by make() (which checks all this), read_csv (data/csv.h), load_fashion_mnist.
struct Dataset {
  /// Features (N, *) float32.
  Tensor X;
  /// Targets: (N) int64 class indices, or (N) / (N, k) float32.
  Tensor y;
  /// Classification with named classes (e.g. read_csv's string labels): class_names[i] is
  /// the label of class index i (sorted order). Empty when the classes are plain integers.
  std::vector<std::string> class_names;

  /// Validates X, y as described above (same N). Throws std::invalid_argument naming both
  /// shapes/dtypes otherwise, or when class_names is given for float targets.
  static Dataset make(Tensor X, Tensor y, std::vector<std::string> class_names = {});

  /// N, the number of samples (0 when X is undefined).
  std::int64_t size() const { return X.defined() ? X.size(0) : 0; }
  /// Values per sample: the product of X's dims after the first (D for (N, D), C·H·W for
  /// (N, C, H, W)).
  std::int64_t num_features() const;
  /// X's shape without the first dim: (D) or (C, H, W).
  Shape sample_shape() const;
  /// True when the targets are class indices (y int64).
  bool is_classification() const { return y.defined() && y.dtype() == Dtype::Int64; }
  /// Rows [begin, end) copied into a new dataset. Throws std::out_of_range.
  Dataset slice(std::int64_t begin, std::int64_t end) const;
  /// The rows at `indices`, in that order, copied. Throws std::out_of_range naming the
  /// first bad index.
  Dataset take(const std::vector<std::int64_t>& indices) const;
  /// The same samples with X viewed as (N, sample_shape) (storage shared, y and
  /// class_names kept), e.g. Fashion-MNIST's (N, 784) rows as (N, 1, 28, 28) images for a
  /// CNN. Throws std::invalid_argument naming both shapes when the element counts differ.
  Dataset reshaped(const Shape& sample_shape) const;
  /// Number of classes: max(max label + 1, class_names.size()) (0 for an empty set).
  /// Throws std::logic_error for float (regression) targets.
  std::int64_t num_classes() const;
};

/// A uniformly random permutation of [0, n), drawn from `gen` (Fisher–Yates with
/// gen.randint), so the same generator state gives the same permutation.
std::vector<std::int64_t> randperm(std::int64_t n, Generator& gen);

/// Training and held-out validation parts of one dataset.
struct TrainValSplit {
  /// The training rows.
  Dataset train;
  /// The held-out validation rows.
  Dataset val;
};

/// Holds out `val_size` random rows (like torch.utils.data.random_split): one permutation
/// from `gen`; its first N - val_size rows, sorted, form the training part, the rest the
/// validation part. Throws std::invalid_argument unless 0 <= val_size <= N.
TrainValSplit train_val_split(const Dataset& full, std::int64_t val_size, Generator& gen);

/// Standardisation x' = (x - mean) / std, with statistics fitted on the training split only
/// (fitting on validation or test data leaks them into training). Population std (ddof 0).
/// Scope::PerFeature (the default) is scikit-learn's StandardScaler: one mean and std per
/// feature, i.e. per position of a sample (per column of (N, D); per (c, h, w) of images).
/// A constant feature (a constant column, constant border pixels) keeps std = 1, so it maps
/// to 0 instead of dividing by zero. Constant means, as in scikit-learn's StandardScaler,
/// var <= n·eps·var + (n·|mean|·eps)² (eps of float64, n values): a bound relative to the
/// feature's magnitude, so a feature in small units (std 1e-7) is scaled like any other.
/// Scope::Global: one mean and one std over every value of X, as torchvision's
/// Normalize((0.2860,), (0.3530,)) for Fashion-MNIST; the usual choice for images.
class Standardizer {
 public:
  /// PerFeature: one mean and std per feature (the default); Global: one for all values.
  enum class Scope { PerFeature, Global };

  /// Computes the statistics of X (N, *) float32 in float64 (two passes: mean, then squared
  /// deviations). Throws std::invalid_argument for an empty or non-float32 X.
  static Standardizer fit(const Tensor& X, Scope scope = Scope::PerFeature);
  /// A Standardizer with given statistics for samples of `features` values: `mean` and
  /// `std` of size 1 (global) or `features` (per feature, samples of shape (features)).
  /// Throws std::invalid_argument for other sizes, features < 1, or a std that is not
  /// finite and > 0, naming the value.
  static Standardizer from_stats(std::int64_t features, std::vector<double> mean, std::vector<double> std);

  /// Returns a standardised float32 copy of X (N, *). Per feature: X's sample shape must be
  /// the fitted one; global: its values per sample must be the fitted count (any layout,
  /// e.g. (N, 784) or (N, 1, 28, 28)). Throws std::invalid_argument naming both shapes.
  Tensor transform(const Tensor& X) const;
  /// transform() on a dataset's X, targets and class names shared.
  Dataset transform(const Dataset& d) const;

  /// The fitted scope.
  Scope scope() const { return scope_; }
  /// scope() == Scope::PerFeature.
  bool per_feature() const { return scope_ == Scope::PerFeature; }
  /// The fitted sample shape ((D), (C, H, W)).
  const Shape& feature_shape() const { return feature_shape_; }
  /// Statistics as values: size 1 (global) or the number of features.
  const std::vector<double>& mean() const { return mean_; }
  /// The standard deviations in use (see the class description for near-constant
  /// features), same size as mean().
  const std::vector<double>& stddev() const { return std_; }
  /// Statistics as float64 tensors: shape (1) (global) or feature_shape() (per feature).
  Tensor mean_tensor() const;
  /// stddev() as a float64 tensor, shaped as mean_tensor().
  Tensor std_tensor() const;

  /// The state a checkpoint carries (see layers::save's extras), in this order:
  ///   "mean", "std"     float64, as mean_tensor() / std_tensor();
  ///   "feature_shape"   int64 (rank), the fitted sample shape.
  /// Prefix the names to store them beside other tensors (e.g. "standardizer.mean").
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Rebuilds a Standardizer from state_dict()'s tensors (names without prefix; other names
  /// are ignored). Throws std::invalid_argument naming the key for a missing tensor, a
  /// wrong dtype or shape, or statistics that from_stats would refuse.
  static Standardizer from_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  Scope scope_ = Scope::PerFeature;
  Shape feature_shape_;
  std::int64_t features_ = 0;  ///< numel(feature_shape_)
  std::vector<double> mean_;   ///< size 1 (global) or features_
  std::vector<double> std_;
};

}  // namespace tapegrad::data
