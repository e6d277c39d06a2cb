#pragma once
// Shape ops. reshape is a view (shares storage); transpose/permute copy.
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Same data under a new shape; one entry may be -1 (inferred). Throws naming both
/// shapes when the element counts differ.
Tensor reshape(const Tensor& x, const Shape& shape);
/// Swaps dimensions d0 and d1 (a copy).
Tensor transpose(const Tensor& x, std::int64_t d0, std::int64_t d1);
/// Reorders dimensions: out.shape[i] = x.shape[dims[i]] (a copy). Throws unless dims
/// is a permutation of 0..rank-1.
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);

}  // namespace tapegrad
