#pragma once
// Loss functions with their tape nodes (PyTorch 1.13 semantics and names, F.mse_loss ...).
// layers/losses.h has them under tapegrad::layers too, with the module-style wrappers.
//
// Shapes: N batch, C classes. Every loss returns a scalar (shape {}) for Mean and Sum,
// and per-element/per-sample values for None. Mean over zero elements throws (PyTorch
// returns NaN). Bad input throws std::invalid_argument naming the expected and the
// actual shape, dtype or value.
#include <cstdint>
#include <string>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// How a loss combines per-element values: "none" (same shape), "mean", "sum".
enum class Reduction { None, Mean, Sum };
/// "none" | "mean" | "sum" -> Reduction; anything else throws naming the value.
Reduction parse_reduction(const std::string& name);

/// Mean squared error: reduce((input - target)²). input and target must have the same
/// shape and dtype (no broadcasting: a (N) target against an (N, 1) input is almost
/// always a bug); throws std::invalid_argument naming both shapes otherwise. Both
/// input and target are differentiable. Default reduction: Mean.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Cross entropy of logits (N, C) against int64 class indices (N) — log_softmax and
/// nll fused: loss_i = logsumexp(x_i) - x_i[t_i], with the row max shifted out, so
/// logits of magnitude 1000 are exact. Unbatched (C) logits with a scalar target are
/// accepted too. Rows whose target equals ignore_index (default -100, as PyTorch)
/// contribute 0 and Mean divides by the number of the other rows.
/// Backward (one kernel): dx_i = (softmax(x_i) - onehot(t_i))·g / count.
/// Throws std::invalid_argument for a target that is not int64, not of shape (N), or
/// holds a class index outside [0, C) (the message names the index, its position and C).
/// Reduction None returns the per-sample losses (N).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     std::int64_t ignore_index = -100);

/// Negative log-likelihood of log-probabilities (N, C) (e.g. log_softmax output) against
/// int64 class indices (N): loss_i = -x_i[t_i]. Same checks, ignore_index and reduction
/// rules as cross_entropy. Backward: dx_i[t_i] = -g / count, 0 elsewhere.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                std::int64_t ignore_index = -100);

/// Binary cross entropy on logits x against targets t in [0, 1] (same shape and dtype),
/// in the stable form loss = max(x, 0) - x·t + log(1 + exp(-|x|)) (never overflows).
/// Backward: dx = (sigmoid(x) - t)·g, dt = -x·g (both differentiable, as in PyTorch).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean);

}  // namespace tapegrad::layers::functional
