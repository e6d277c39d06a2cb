#pragma once
// The state BatchNorm and InstanceNorm share: PyTorch's per-channel affine parameters and
// running-statistics buffers.
#include <cstdint>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Base of the per-channel norm modules (BatchNormBase, InstanceNormBase): over C
/// channels, the parameters weight γ and bias β and the buffers running_mean,
/// running_var and num_batches_tracked, under PyTorch's names and in PyTorch's
/// registration (and so state_dict) order.
class ChannelNormBase : public Module {
 public:
  ///@{
  /// Parameters: weight γ (init 1) and bias β (init 0), (C) each; undefined unless affine.
  Tensor weight, bias;
  ///@}
  ///@{
  /// Buffers: running_mean (C), running_var (C), num_batches_tracked (int64 scalar);
  /// undefined unless track_running_stats.
  Tensor running_mean, running_var, num_batches_tracked;
  ///@}

  /// Sets running_mean 0, running_var 1, num_batches_tracked 0; does nothing without
  /// running statistics.
  void reset_running_stats();

 protected:
  /// Registers weight = ones (C) and bias = zeros (C) when `affine`, and running_mean =
  /// zeros (C), running_var = ones (C) (both of `dtype`) and num_batches_tracked = int64
  /// scalar 0 when `track_running_stats`.
  void register_norm_state(std::int64_t c, Dtype dtype, bool affine, bool track_running_stats);
  /// Registers `src`'s weight, bias, running_mean, running_var and num_batches_tracked (those
  /// defined) under the same names: the same tensors, not copies, so both modules (and an
  /// optimizer holding src's parameters) see one state. For layers::fuse_modules.
  void share_norm_state(const ChannelNormBase& src);
  /// Module's finiteness check, plus: running_var >= 0 (a variance) and
  /// num_batches_tracked >= 0 (a count). For load_state_dict.
  std::string check_state_value(const std::string& name, const Tensor& value) const override;
  /// PyTorch's _NormBase._load_from_state_dict: a checkpoint from before
  /// num_batches_tracked existed (PyTorch < 0.4.1) holds running_mean and running_var
  /// only; the counter is set to 0 and listed in LoadResult::filled.
  void upgrade_state_dict(const std::string& prefix, const StateDict& incoming, StateDict& added,
                          std::vector<std::string>& filled) const override;
};

}  // namespace tapegrad::layers
