#pragma once
// The per-group normalisation tape node that LayerNorm, GroupNorm and InstanceNorm share:
// one forward and one fused backward over rows of K values.
#include <cstdint>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

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
