#pragma once
// Functional instance normalisation (Ulyanov, Vedaldi & Lempitsky 2016, "Instance
// Normalization: The Missing Ingredient for Fast Stylization", eq. 2), PyTorch's
// F.instance_norm.
#include <string>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/running_stats.h>

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

/// The same with a module's running statistics (InstanceNorm's entry point): the update is
/// RunningStats::update with the batch averages mean_n(μ[n, c]) and mean_n(σ²[n, c]) over
/// S values (so running_var takes mean_n(σ²)·S/(S-1), PyTorch's rule; num_batches_tracked is
/// never incremented: leave it undefined in `running`). eps and running.momentum are checked
/// here, once per call, with errors prefixed by `who`; a single position per instance
/// (S = 1) is refused by check_values_per_channel before any buffer changes.
Tensor instance_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                     bool use_input_stats, double eps, const std::string& who = "instance_norm");

}  // namespace tapegrad::layers::functional
