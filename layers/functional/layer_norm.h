#pragma once
// Functional layer normalisation (Ba, Kiros & Hinton 2016, "Layer Normalization",
// eq. 4), PyTorch's F.layer_norm.
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// Normalises x of shape (*, normalized_shape...) over its trailing dims: for each of
/// the leading positions, μ and the biased variance σ² = Σ(x-μ)²/D are taken over the
/// D = prod(normalized_shape) trailing values, and
///   y = (x - μ)/sqrt(σ² + eps)·weight + bias,
/// with weight and bias of shape normalized_shape (per element; either may be
/// undefined = 1, 0). No sample sees another, so train and eval mode agree.
/// Backward: the fused form of functional::detail::grouped_norm (S = 1, G = 1).
/// Throws std::invalid_argument naming both shapes when x's trailing dims are not
/// normalized_shape, when weight/bias are not normalized_shape, or normalized_shape is empty.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace tapegrad::layers::functional
