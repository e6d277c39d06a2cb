#pragma once
// Instance normalisation (Ulyanov, Vedaldi & Lempitsky 2016, "Instance Normalization:
// The Missing Ingredient for Fast Stylization"), PyTorch's nn.InstanceNorm1d/2d.
#include <tapegrad/layers/channel_norm.h>

namespace tapegrad::layers {

/// Options of the instance-norm modules. Defaults are PyTorch's (note: unlike
/// BatchNorm, affine and track_running_stats are off by default).
struct InstanceNormOptions {
  double eps = 1e-5;                  ///< added to the variance inside the sqrt
  double momentum = 0.1;              ///< PyTorch convention: run = (1 - m)·run + m·batch
  bool affine = false;                ///< learnable weight γ (init 1) and bias β (init 0), shape (C)
  bool track_running_stats = false;  ///< keep running_mean (0), running_var (1), num_batches_tracked (0)
  /// dtype of the parameters and buffers (float32 or float64).
  Dtype dtype = Dtype::Float32;
};

/// Statistics per (sample, channel) over the positions after C (L, or H and W).
///
/// Train mode, or track_running_stats = false: each (n, c) is normalised with its own
/// mean and biased variance. With track_running_stats, train mode also moves
/// running_mean / running_var toward the batch average of the per-instance mean and
/// unbiased variance (PyTorch's rule); num_batches_tracked exists (for checkpoint
/// compatibility) but is never incremented.
/// Eval mode with track_running_stats: running_mean / running_var per channel, as in
/// BatchNorm's eval mode.
/// Throws std::invalid_argument naming the shape when the channels do not match, and
/// when a single position per instance (L = 1, H·W = 1) would be normalised with its
/// own statistics.
class InstanceNormBase : public ChannelNormBase {
 public:
  /// Registers the parameters and buffers the options ask for, over `num_features`
  /// channels C. Throws std::invalid_argument for num_features < 1 or invalid options
  /// (eps, momentum), naming the value.
  InstanceNormBase(std::int64_t num_features, InstanceNormOptions options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  /// C, the number of channels.
  std::int64_t num_features;
  /// The options as constructed.
  InstanceNormOptions options;
  // weight, bias, running_mean, running_var, num_batches_tracked, reset_running_stats():
  // ChannelNormBase.

 protected:
  /// Rank of a batched input (3 for 1d, 4 for 2d); rank - 1 is accepted as unbatched.
  virtual std::int64_t batched_rank() const = 0;
  /// The accepted input shapes, for error messages ("3D (N, C, L) or 2D (C, L)").
  virtual const char* shape_text() const = 0;
};

/// InstanceNorm over (N, C, L) (or unbatched (C, L)): statistics per (n, c) over L.
class InstanceNorm1d : public InstanceNormBase {
 public:
  /// InstanceNorm1d over `num_features` channels C.
  explicit InstanceNorm1d(std::int64_t num_features, InstanceNormOptions options = {})
      : InstanceNormBase(num_features, options) {}
  std::string type_name() const override { return "InstanceNorm1d"; }

 protected:
  std::int64_t batched_rank() const override { return 3; }
  const char* shape_text() const override { return "3D (N, C, L) or 2D (C, L)"; }
};

/// InstanceNorm over (N, C, H, W) (or unbatched (C, H, W)): statistics per (n, c) over H, W.
class InstanceNorm2d : public InstanceNormBase {
 public:
  /// InstanceNorm2d over `num_features` channels C.
  explicit InstanceNorm2d(std::int64_t num_features, InstanceNormOptions options = {})
      : InstanceNormBase(num_features, options) {}
  std::string type_name() const override { return "InstanceNorm2d"; }

 protected:
  std::int64_t batched_rank() const override { return 4; }
  const char* shape_text() const override { return "4D (N, C, H, W) or 3D (C, H, W)"; }
};

}  // namespace tapegrad::layers
