#pragma once
// Gradient clipping, PyTorch's torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#include <limits>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::optim {

/// Scales every defined gradient in place by min(1, max_norm / (total_norm + 1e-6)), where
/// total_norm is the norm_type-norm of all gradients taken together (the norm of the
/// per-tensor norms; norm_type = infinity gives the largest |g|). Returns total_norm
/// (0 when no parameter has a gradient). Parameters without a gradient are skipped.
/// Norms are accumulated in double. Throws std::invalid_argument for max_norm < 0 or
/// norm_type <= 0, and std::runtime_error naming total_norm when it is NaN or Inf and
/// error_if_nonfinite is true (gradients unchanged then).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every defined gradient element into [-clip_value, clip_value] in place.
/// Throws std::invalid_argument for clip_value < 0 or NaN.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace tapegrad::optim
