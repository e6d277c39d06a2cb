#pragma once
// SampleSource: a classification dataset whose samples are produced on demand (decoded from
// files, for one), so that it need not fit in memory. DataLoader batches one like an
// in-memory Dataset, on worker threads if asked (data/dataloader.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::data {

/// N samples, each a float32 tensor of sample_shape() with an int64 class index. get() and
/// target() must be safe to call from several threads at once (a DataLoader's workers do).
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  /// N, the number of samples.
  virtual std::int64_t size() const = 0;
  /// The shape of every sample, e.g. (C, H, W).
  virtual const Shape& sample_shape() const = 0;
  /// Sample i (0 <= i < size()) as a new float32 tensor of sample_shape(). Throws
  /// std::out_of_range for a bad i, and whatever producing it throws (named by the source).
  virtual Tensor get(std::int64_t i) const = 0;
  /// The class index of sample i. Throws std::out_of_range for a bad i.
  virtual std::int64_t target(std::int64_t i) const = 0;
  /// Names of the class indices (empty when the classes are plain integers).
  virtual const std::vector<std::string>& classes() const = 0;
};

/// The samples of `base` at `indices`, in that order (torch.utils.data.Subset): a training
/// or validation part of a lazily decoded dataset. Throws std::invalid_argument for a null
/// base, std::out_of_range naming the first index outside 0 .. N-1.
class Subset : public SampleSource {
 public:
  /// Keeps `base` alive and checks every index.
  Subset(std::shared_ptr<const SampleSource> base, std::vector<std::int64_t> indices);
  /// The number of indices.
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }
  /// base's sample shape.
  const Shape& sample_shape() const override { return base_->sample_shape(); }
  /// base->get(indices[i]).
  Tensor get(std::int64_t i) const override;
  /// base->target(indices[i]).
  std::int64_t target(std::int64_t i) const override;
  /// base's class names.
  const std::vector<std::string>& classes() const override { return base_->classes(); }
  /// The indices into base.
  const std::vector<std::int64_t>& indices() const { return indices_; }

 private:
  std::int64_t base_index(std::int64_t i) const;
  std::shared_ptr<const SampleSource> base_;
  std::vector<std::int64_t> indices_;
};

}  // namespace tapegrad::data
