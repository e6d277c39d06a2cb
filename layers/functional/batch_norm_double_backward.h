// batch_norm's backward from differentiable ops, for a create_graph pass.
#pragma once

#include <functional>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional::detail {

/// The gradients of y = γ·(x − μ)·invstd + β for x (N, C, *), from public differentiable ops,
/// added to `gs` (input 0: x, 1: weight, 2: bias), so a create_graph backward can be
/// differentiated again. `g` has x's shape and dtype; `weight` is (C) or undefined (γ = 1).
/// Train mode (`train`): μ and invstd = 1/√(σ² + eps) are recomputed from x (biased σ², over
/// N·S values per channel), so the result differentiates through the batch statistics;
/// eval mode: `running_mean` and `rstd` (C values each) are constants. `rstd` is also
/// read in train mode, to refuse a channel whose σ² + eps is 0.
/// With x̂ = (x − μ)·invstd and m = N·S (Ioffe & Szegedy 2015, §3; PyTorch's
/// batchnorm_double_backward in torch/csrc/autograd/FunctionsManual.cpp differentiates the same):
///   dx = (γ·invstd/m)·(m·g − Σg − x̂·Σ(g·x̂))   (train),   dx = γ·invstd·g   (eval),
///   dγ = Σ(g·x̂),   dβ = Σg,   sums over every dimension but C.
/// Throws std::logic_error naming `who` for a train-mode channel with σ² + eps = 0 (the
/// first-order backward returns zeros there by convention; that convention has no derivative).
/// `across` (train mode, optional): the sum of a (C) tensor over the whole batch of which x is
/// a part (SyncBatchNorm: an all-reduce over ranks, differentiable); then the statistics and
/// the two means of dx are those of the whole batch of `count` values per channel,
/// μ = across(Σx)/count, σ² = across(Σ(x − μ)²)/count, mean(·) = across(Σ·)/count, while dγ
/// and dβ stay this part's own sums (as the first-order backward).
void batch_norm_backward_differentiable(const Tensor& g, const Tensor& x, const Tensor& weight, const double* running_mean,
                                        const double* rstd, bool train, double eps, GradSink& gs,
                                        const char* who = "batch_norm",
                                        const std::function<Tensor(const Tensor&)>* across = nullptr,
                                        double count = 0);

}  // namespace tapegrad::layers::functional::detail
