#pragma once
// Row selection for the diagnostics (copies; not recorded on the tape).
#include <cstdint>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::debug {

/// Rows `rows` of x (dim 0) in that order, as a new tensor of shape (rows.size(), ...).
/// Throws std::out_of_range naming the index and x's shape when an index is outside [0, N).
Tensor take_rows(const Tensor& x, const std::vector<std::int64_t>& rows);
/// max |a - b| over all elements; throws std::invalid_argument naming both shapes on mismatch.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace tapegrad::debug
