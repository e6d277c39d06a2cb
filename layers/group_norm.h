#pragma once
// Group normalisation (Wu & He 2018, "Group Normalization"), PyTorch's nn.GroupNorm.
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

/// GroupNorm's arguments (layers/options.h): GroupNormOptions(num_groups, num_channels)
/// with eps 1e-5, affine true, float32.
class GroupNormOptions {
 public:
  GroupNormOptions(std::int64_t num_groups, std::int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  TAPEGRAD_ARG(std::int64_t, num_groups);
  TAPEGRAD_ARG(std::int64_t, num_channels);
  TAPEGRAD_ARG(double, eps, 1e-5);
  TAPEGRAD_ARG(bool, affine, true);
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
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5, bool affine = true,
            Dtype dtype = Dtype::Float32);
  /// From options: GroupNorm(GroupNormOptions(8, 64).eps(1e-3)).
  explicit GroupNorm(const GroupNormOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override;

  std::int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;  ///< (C); undefined unless affine
};

}  // namespace tapegrad::layers
