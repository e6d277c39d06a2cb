#pragma once
// Joining and selecting: cat, stack, where, masked_fill.
//
// Conditions and masks are float32/float64/int64 tensors read as booleans the way
// PyTorch converts to bool: 0 is false, any other value (normally 1) is true. They
// broadcast like operands and are never differentiated.
#include <cstdint>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Concatenates along dim (torch.cat). All tensors need the same dtype and rank and
/// equal sizes except along dim; the error names the first tensor's shape and the
/// offending one (with its index). Any dtype; gradients flow to float inputs.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// Stacks equal-shape tensors along a new dimension dim, -(rank+1) <= dim <= rank
/// (torch.stack): k tensors of (N, C) give (k, N, C) for dim 0.
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// out = cond ? a : b element-wise, cond, a and b broadcast together (torch.where).
/// a and b: same float dtype. d/da = g where cond, d/db = g elsewhere (summed over
/// broadcast dims). Shape errors name all three shapes.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever mask is true (torch.masked_fill); mask must broadcast to x's
/// shape (the error names both). d/dx = g where mask is false, 0 where it is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace tapegrad
