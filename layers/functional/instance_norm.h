#pragma once
// Functional instance normalisation (Ulyanov, Vedaldi & Lempitsky 2016, "Instance
// Normalization: The Missing Ingredient for Fast Stylization", eq. 2), PyTorch's
// F.instance_norm.
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// Normalises x of shape (N, C, L) or (N, C, H, W) (any rank >= 3) per (sample,
/// channel) over the S = L or H·W positions.
///
/// use_input_stats = true: μ and the biased variance σ² = Σ(x-μ)²/S of each (n, c);
///   when running_mean / running_var (C) are given they move toward the batch average
///   of the per-instance statistics:
///     run_mean = (1 - momentum)·run_mean + momentum·mean_n(μ[n, c])
///     run_var  = (1 - momentum)·run_var  + momentum·mean_n(σ²[n, c]·S/(S-1))
///   Throws std::invalid_argument when S = 1 (before any change).
/// use_input_stats = false: running_mean / running_var (both required) as in
///   batch_norm's eval mode.
/// y = (x - μ)/sqrt(σ² + eps)·weight[c] + bias[c]; weight, bias (C) may be undefined.
/// Backward: the fused form of functional::detail::grouped_norm with G = C (input
/// statistics) or batch_norm's eval backward (running statistics).
/// Throws std::invalid_argument naming the shapes when C or a dtype does not match.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats, double momentum = 0.1,
                     double eps = 1e-5);

}  // namespace tapegrad::layers::functional
