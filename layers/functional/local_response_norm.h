#pragma once
// Functional local response normalisation across channels (Krizhevsky, Sutskever & Hinton
// 2012, section 3.3), PyTorch's F.local_response_norm; the tape node keeps the forward and
// the backward side by side in local_response_norm.cpp.
#include <cstdint>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// x of shape (N, C, *) with rank >= 3 ((N, C, L), (N, C, H, W), ...). For channel c:
///   D_c = k + (alpha/size)·Σ_{c' = c - size/2}^{c + (size-1)/2} x_c'²,   y_c = x_c / D_c^beta
/// (integer division; channels outside [0, C) count as zeros; PyTorch divides alpha by
/// size, the paper does not). Backward, with W(j) = {c : j in c's window}:
///   dx_j = dy_j·D_j^(-beta) - (2·alpha·beta/size)·x_j·Σ_{c in W(j)} dy_c·x_c·D_c^(-beta-1)
/// Throws std::invalid_argument for rank < 3 (naming the shape) or size < 1.
Tensor local_response_norm(const Tensor& x, std::int64_t size, double alpha = 1e-4, double beta = 0.75,
                           double k = 1.0);

}  // namespace tapegrad::layers::functional
