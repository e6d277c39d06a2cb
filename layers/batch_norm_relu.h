#pragma once
// BatchNorm1d followed by ReLU (and a Clamp) as one module, for layers::fuse_modules.
#include <optional>
#include <utility>

#include <tapegrad/layers/batch_norm.h>

namespace tapegrad::layers {

/// BatchNorm1d → ReLU [→ Clamp(lo, hi)] as one module and one op: y = relu(bn(x)), clamped to
/// [lo, hi] when `clip` is set (lo <= 0 <= hi). It is a BatchNorm1d (same input shapes (N, C) and
/// (N, C, L), parameters, buffers, state_dict keys, options, train/eval behaviour, errors); its
/// forward is BatchNormBase::forward_relu (functional::batch_norm_relu: one tape node
/// "batch_norm_relu", the same bits as the layers run apart, forward and backward). Like
/// PyTorch's fused BNReLU2d (torch.ao.nn.intrinsic), made by layers::fuse_modules, which
/// leaves Identity in the ReLU's and the Clamp's places. A forward hook on it sees the
/// activated (and clamped) output. type_name "BatchNorm1dReLU", so code that knows only
/// BatchNorm1d does not mistake it for one (a dynamic_cast to BatchNorm1d or BatchNormBase
/// finds it).
class BatchNorm1dReLU : public BatchNorm1d {
 public:
  /// A fresh BatchNorm1d(num_features, options) with the activation; throws what BatchNorm1d
  /// throws, and std::invalid_argument for a clip without lo <= 0 <= hi (or a NaN bound).
  explicit BatchNorm1dReLU(std::int64_t num_features, BatchNormOptions options = {},
                           std::optional<std::pair<double, double>> clip = std::nullopt);
  /// The fused module over `bn`'s own tensors (the same parameter and buffer handles, so an
  /// optimizer built on bn's parameters keeps working), its options and mode; throws as above.
  static std::shared_ptr<BatchNorm1dReLU> sharing(const BatchNorm1d& bn,
                                                  std::optional<std::pair<double, double>> clip = std::nullopt);
  Tensor forward(const Tensor& x) override { return forward_relu(x, clip); }
  std::string type_name() const override { return "BatchNorm1dReLU"; }
  /// BatchNorm1d's, then ", clip=(lo, hi)" when clipped.
  std::string extra_repr() const override;

  /// The clamp after the ReLU, (lo, hi) with lo <= 0 <= hi; nullopt: none.
  const std::optional<std::pair<double, double>> clip;

 private:
  BatchNorm1dReLU(const BatchNorm1d& bn, std::optional<std::pair<double, double>> clip);
};

}  // namespace tapegrad::layers
