#pragma once
// The chapter's sanity checks for a hand-derived BatchNorm backward (train mode).
#include <string>

#include <tapegrad/core/tensor.h>

namespace tapegrad::debug {

/// Residuals of the two identities a correct train-mode BatchNorm input gradient obeys,
/// per channel c over N (and L / H·W), with x̂ = (x - μ)/σ from the batch (biased σ):
///   Σ dX[:, c] = 0          (the output is invariant to shifting x[:, c])
///   Σ dX[:, c]·x̂[:, c] = 0  (the output is invariant to scaling x[:, c])
/// Both are exact for eps = 0; with eps > 0 the second has a relative residual of about
/// eps/(σ² + eps). Each residual is reported relative to its channel's scale
/// (|Σ a| / Σ |a|), maximised over channels.
struct BnBackwardCheck {
  double col_sum = 0;       ///< max_c |Σ dX| / Σ |dX|
  double col_dot_xhat = 0;  ///< max_c |Σ dX·x̂| / Σ |dX·x̂|
  /// Both residuals <= tol. A float32 kernel stays near 1e-6; a wrong derivation (statistics
  /// held constant, mean over the wrong axis, N-1 variance in the backward) gives 1e-2 or more.
  bool ok(double tol = 1e-3) const { return col_sum <= tol && col_dot_xhat <= tol; }
  /// Both residuals and the verdict: "max_c |sum dX|/sum|dX| = ..., max_c |sum dX*xhat|/...
  /// = ... (ok)" (or "(FAILED)", by ok() at its default tolerance).
  std::string to_string() const;
};

/// x: the BatchNorm's input (N, C), (N, C, L) or (N, C, H, W); dx: the gradient of a loss
/// with respect to x (same shape). Throws std::invalid_argument naming both shapes when
/// they differ, or for rank < 2 / N·L < 2.
BnBackwardCheck bn_backward_invariants(const Tensor& x, const Tensor& dx);

}  // namespace tapegrad::debug
