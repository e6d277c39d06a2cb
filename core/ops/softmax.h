#pragma once
// softmax and log_softmax over one axis, numerically stable: the row maximum is
// subtracted before exponentiating, so logits of magnitude 1000 give exact results
// (no overflow to inf, no NaN). Any rank; `dim` may be negative; float32/float64.
// An axis out of range throws std::out_of_range naming the axis and the rank.
#include <cstdint>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// yᵢ = exp(xᵢ - m) / Σⱼ exp(xⱼ - m), m = maxⱼ xⱼ, along dim.
/// Backward: dx = y·(g - Σⱼ gⱼyⱼ).
Tensor softmax(const Tensor& x, std::int64_t dim);
/// yᵢ = xᵢ - m - log Σⱼ exp(xⱼ - m) (log-sum-exp with the max shifted out).
/// Backward: dx = g - exp(y)·Σⱼ gⱼ.
Tensor log_softmax(const Tensor& x, std::int64_t dim);
/// log Σⱼ exp(xⱼ) along dim (stable); keepdim keeps the axis as size 1.
/// Backward: dx = g·softmax(x).
Tensor logsumexp(const Tensor& x, std::int64_t dim, bool keepdim = false);

}  // namespace tapegrad
