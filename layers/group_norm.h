#pragma once
// Group normalisation (Wu & He 2018, "Group Normalization"), PyTorch's nn.GroupNorm.
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

/// GroupNorm's arguments (layers/options.h): GroupNormOptions(num_groups, num_channels)
/// with eps 1e-5, affine true, float32.
class GroupNormOptions {
 public:
  /// Options with the required group and channel counts; the rest default.
  GroupNormOptions(std::int64_t num_groups, std::int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  /// Groups G, >= 1, dividing num_channels.
  TAPEGRAD_ARG(std::int64_t, num_groups);
  /// Channels C, >= 1.
  TAPEGRAD_ARG(std::int64_t, num_channels);
  /// Added to the variance inside the sqrt; finite, >= 0; default 1e-5.
  TAPEGRAD_ARG(double, eps, 1e-5);
  /// Learnable per-channel weight (init 1) and bias (init 0); default true.
  TAPEGRAD_ARG(bool, affine, true);
  /// dtype of weight and bias; default float32.
  TAPEGRAD_ARG(Dtype, dtype, Dtype::Float32);
};

/// Input (N, C, *): (N, C), (N, C, L), (N, C, H, W). The C channels are split into
/// num_groups groups of C/num_groups consecutive channels; each (sample, group) is
/// normalised with the mean and biased variance of its (C/G)·L (or (C/G)·H·W) values,
/// then scaled and shifted per channel:
///   y = (x - μ_ng)/sqrt(σ²_ng + eps)·weight[c] + bias[c]
/// num_groups = 1 is LayerNorm over (C, *) with per-channel affine; num_groups = C is
/// InstanceNorm with affine. Defaults: eps 1e-5, affine true (weight ones, bias zeros,
/// shape (C)). No buffers; train and eval mode agree.
/// Throws std::invalid_argument when num_channels is not divisible by num_groups (naming
/// both), and naming the shape when the input is not (N, num_channels, *).
class GroupNorm : public Module {
 public:
  /// Positional form of GroupNormOptions (same defaults). Throws std::invalid_argument
  /// for counts < 1, num_channels not divisible by num_groups, or eps < 0 or not finite.
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5, bool affine = true,
            Dtype dtype = Dtype::Float32);
  /// From options: GroupNorm(GroupNormOptions(8, 64).eps(1e-3)).
  explicit GroupNorm(const GroupNormOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override;

  ///@{
  /// Group and channel counts G and C.
  std::int64_t num_groups, num_channels;
  ///@}
  /// Added to the variance inside the sqrt.
  double eps;
  /// Whether weight and bias exist.
  bool affine;
  ///@{
  /// Parameters weight and bias, (C) each; undefined unless affine.
  Tensor weight, bias;
  ///@}
};

}  // namespace tapegrad::layers
