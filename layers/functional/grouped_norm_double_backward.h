// grouped_norm's backward from differentiable ops, for a create_graph pass.
#pragma once

#include <cstdint>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional::detail {

/// The gradients of grouped_norm's y = γ[c]·(x − μ)·rstd + β[c] (LayerNorm, GroupNorm,
/// InstanceNorm on batch statistics), from public differentiable ops, added to `gs` (input 0:
/// x, 1: weight, 2: bias), so a create_graph backward can be differentiated again (and again:
/// every op used is itself differentiable twice).
/// x (numel = N'·C·S) is viewed as (N', G, Cg, S) with Cg = C/G; the statistics of each
/// (n', g) row of K = Cg·S values are recomputed from x (biased σ², rstd = 1/√(σ² + eps)), so
/// the result differentiates through them. `g` has x's shape and dtype; `weight` holds C
/// values (viewed as (1, G, Cg, 1)) or is undefined (γ = 1); dβ gets `bias_shape`.
/// `rstd` (R = N'·G values from the forward) is read to refuse a row whose σ² + eps is 0.
/// Per row, with x̂ = (x − μ)·rstd and means over the row's K values (Ioffe & Szegedy 2015,
/// §3, the BatchNorm backward applied per row; PyTorch's layer_norm_double_backward and
/// infinitely_differentiable_native_group_norm_backward in FunctionsManual.cpp differentiate
/// the same function):
///   dx = rstd·(γ·g − mean(γ·g) − x̂·mean(γ·g·x̂)),   dγ[c] = Σ g·x̂,   dβ[c] = Σ g
/// (the sums over every row and position of channel c).
/// Throws std::logic_error naming `op` and the row for σ² + eps = 0 (a constant row with
/// eps = 0: the first-order kernels' NaN there has no derivative to differentiate).
void grouped_norm_backward_differentiable(const Tensor& g, const Tensor& x, const Tensor& weight, const Shape& bias_shape,
                                          std::int64_t C, std::int64_t S, std::int64_t G, double eps,
                                          const double* rstd, GradSink& gs, const char* op);

}  // namespace tapegrad::layers::functional::detail
