#pragma once
// Loss functions.
#include "core/tensor.h"

namespace tapegrad::layers {

/// How a loss combines per-element values: "none" (same shape), "mean", "sum".
enum class Reduction { None, Mean, Sum };

/// Mean squared error: reduce((input - target)²). input and target must have the same
/// shape and dtype (no broadcasting: a (N) target against an (N, 1) input is almost
/// always a bug); throws std::invalid_argument naming both shapes otherwise. Both
/// input and target are differentiable. Default reduction: Mean.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace tapegrad::layers
