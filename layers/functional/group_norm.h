#pragma once
// Functional group normalisation (Wu & He 2018, "Group Normalization", eq. 1-4),
// PyTorch's F.group_norm, and the fused per-group kernel that LayerNorm and
// InstanceNorm share with it.
#include <vector>

#include "core/tensor.h"

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

namespace detail {

/// The fused kernel behind LayerNorm, GroupNorm and InstanceNorm.
/// x (any shape, contiguous) is read as (R, K): R = numel/K rows ("groups") of K
/// consecutive values, with K = C·S/G. Value j of row r belongs to affine channel
/// c = (r mod G)·(C/G) + j/S, so
///   LayerNorm:    C = prod(normalized_shape), S = 1, G = 1  (per-element γ, β)
///   GroupNorm:    C = channels, S = spatial size, G = groups
///   InstanceNorm: C = channels, S = spatial size, G = C
/// weight / bias: C values (any shape) or undefined. Statistics are accumulated in
/// float64 with a second pass around the mean (exact for constant groups).
/// group_mean / group_var (optional) receive the R means and biased variances.
///
/// Backward, per row, with x̂ = (x - μ)·rstd, rstd = 1/sqrt(σ² + eps):
///   dx̂ = γ[c]·dy                                  (γ applied before the means)
///   dx  = rstd·(dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂))    (means over the row's K values)
///   dγ[c] = Σ dy·x̂,  dβ[c] = Σ dy                  (sums over every row and position of c)
/// `op` is a string literal naming the op on the tape and in errors.
Tensor grouped_norm(const Tensor& x, std::int64_t C, std::int64_t S, std::int64_t G, const Tensor& weight,
                    const Tensor& bias, double eps, const char* op, std::vector<double>* group_mean = nullptr,
                    std::vector<double>* group_var = nullptr);

}  // namespace detail
}  // namespace tapegrad::layers::functional
