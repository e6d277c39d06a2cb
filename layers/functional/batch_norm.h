#pragma once
// Functional batch normalisation (Ioffe & Szegedy 2015, Algorithm 1), PyTorch's
// F.batch_norm. For users who keep their own running statistics.
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// Normalises x of shape (N, C), (N, C, L) or (N, C, H, W) (any rank >= 2) per channel c,
/// over N and every dimension after C (m = N·L or N·H·W values per channel).
///
/// training = true: uses the batch mean μ and biased variance σ² = Σ(x-μ)²/m, and, when
///   running_mean / running_var are defined, updates them in place:
///   run = (1 - momentum)·run + momentum·batch, with the unbiased variance σ²·m/(m-1)
///   (unbiased_running_var = false: the biased σ², as some frameworks and many hand-written
///   layers do).
///   Throws std::invalid_argument when m = 1 (one value per channel), before any change.
///   A channel with σ² + eps = 0 (constant, eps = 0) gets rstd = 0: output β, zero gradient,
///   as PyTorch.
/// training = false: uses running_mean / running_var (both required).
/// y = (x - μ)/sqrt(σ² + eps)·weight + bias; weight and bias (C) may be undefined (= 1, 0).
///
/// Backward (fused, one reduction pass and one element-wise pass), with x̂ = (x-μ)/σ and
/// dx̂ = γ·dy:  dx = (dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)) / sqrt(σ² + eps)   (train)
///             dx = γ·dy / sqrt(running_var + eps)                     (eval)
///             dγ = Σ dy·x̂,  dβ = Σ dy.
/// Throws std::invalid_argument naming the shapes when C or a dtype does not match.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                  bool unbiased_running_var = true);

/// Per-channel batch statistics of x viewed as (N, C, S): mean and biased variance
/// (float64, shape (C)). Used by BatchRenorm and the diagnostics.
void batch_moments(const Tensor& x, Tensor& mean, Tensor& biased_var);

}  // namespace tapegrad::layers::functional
