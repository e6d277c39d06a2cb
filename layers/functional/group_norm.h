#pragma once
// Functional group normalisation (Wu & He 2018, "Group Normalization", eq. 1-4),
// PyTorch's F.group_norm. Its tape node, shared with LayerNorm and InstanceNorm, is
// detail::grouped_norm (grouped_norm.h).
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// Normalises x of shape (N, C, *) ((N, C), (N, C, L), (N, C, H, W), ...) over groups of
/// C/G consecutive channels: for each sample n and group g, the mean μ and biased
/// variance σ² = Σ(x-μ)²/K are taken over K = (C/G)·L (or (C/G)·H·W) values, then
/// y = (x - μ)/sqrt(σ² + eps)·weight[c] + bias[c].
/// weight and bias have shape (C) and may be undefined (= 1 and 0). The statistics do
/// not depend on other samples, so train and eval mode agree.
/// Throws std::invalid_argument naming the values when num_groups <= 0, C is not
/// divisible by num_groups, the input has rank < 2, or weight/bias are not (C) of the
/// input's dtype.
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace tapegrad::layers::functional
