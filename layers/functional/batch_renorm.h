#pragma once
// Functional batch renormalisation, train mode (Ioffe 2017, "Batch Renormalization: Towards
// Reducing Minibatch Dependence in Batch-Normalized Models", Algorithm 1). The module
// (layers/batch_renorm.h) documents the formulas; eval mode is batch_norm's.
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// Throws std::invalid_argument unless rmax >= 1 and dmax >= 0 (naming the value).
void check_renorm_clipping(double rmax, double dmax);

/// Renormalised train-mode forward of x (N, C, *) against running_mean / running_var (C,
/// required, x's dtype), which are then updated as batch_norm's training mode does with
/// factor `momentum` (and unbiased_running_var). r and d (float64, (C)) are computed from
/// the running statistics before the update and returned in r_out, d_out; they carry no
/// gradient (the paper's stop_gradient), so the backward is batch_norm's fused one with
/// γ' = γ·r, β' = γ·d + β. weight / bias (C) may be undefined (= 1, 0).
/// Throws std::invalid_argument for a dtype mismatch or one value per channel, before any
/// buffer changes.
Tensor batch_renorm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                    const Tensor& bias, double momentum, double eps, double rmax, double dmax, Tensor& r_out,
                    Tensor& d_out, bool unbiased_running_var = true);

}  // namespace tapegrad::layers::functional
