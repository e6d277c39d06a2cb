#pragma once
// Functional batch renormalisation, train mode (Ioffe 2017, "Batch Renormalization: Towards
// Reducing Minibatch Dependence in Batch-Normalized Models", Algorithm 1). The module
// (layers/batch_renorm.h) documents the formulas; eval mode is batch_norm's.
#include <string>

#include <tapegrad/core/tensor.h>
#include <tapegrad/layers/functional/running_stats.h>

namespace tapegrad::layers::functional {

/// Throws std::invalid_argument unless rmax >= 1 and dmax >= 0 (naming the value).
void check_renorm_clipping(double rmax, double dmax);

/// Renormalised train-mode forward of x (N, C, *) against `running` (required: running_mean
/// / running_var (C) of x's dtype), which batch_norm then updates from the batch
/// (RunningStats::update: factor, unbiased variance, num_batches_tracked). r and d
/// (float64, (C)) are computed from the running statistics before the update and returned
/// in r_out, d_out; they carry no gradient (the paper's stop_gradient), so the backward is
/// batch_norm's fused one with γ' = γ·r, β' = γ·d + β. weight / bias (C) may be undefined
/// (= 1, 0). Throws std::invalid_argument (prefixed `who`) for bad clipping, missing running
/// statistics, a dtype mismatch, and as batch_norm (options, one value per channel), before
/// any buffer or r_out / d_out changes.
Tensor batch_renorm(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running, double eps,
                    double rmax, double dmax, Tensor& r_out, Tensor& d_out, const std::string& who = "batch_renorm");

}  // namespace tapegrad::layers::functional
