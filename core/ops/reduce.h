#pragma once
// Reductions. `axes` may be negative; an empty list means all axes.
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Sum of every element (shape {}).
Tensor sum(const Tensor& x);
/// Sum over `axes`; keeps them as size-1 dims when keepdim. Throws for an axis out of range.
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim = false);
/// Mean of every element.
Tensor mean(const Tensor& x);
/// Mean over `axes` (sum divided by the number of reduced elements).
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes, bool keepdim = false);
/// Sums x down to `shape` (the inverse of broadcasting; used by broadcast backwards).
/// Throws when x's shape does not broadcast from `shape`.
Tensor sum_to(const Tensor& x, const Shape& shape);
/// Repeats x along broadcast dimensions to `shape` (a copy; backward is sum_to).
Tensor broadcast_to(const Tensor& x, const Shape& shape);

namespace detail {
/// Column sums of a 2-D (R, C) float tensor as a (C) tensor, never recorded; the same
/// values, bit for bit, as sum(x, {0}) (rows added in order). Used by backwards.
Tensor sum_rows_values(const Tensor& x);
/// A sum over a middle axis (x viewed as (outer, R, inner), inner > 1) adds blocks of
/// 128 bytes of columns (32 float32 or 16 float64) in registers, and the columns past the
/// last whole block in place: the same order of additions either way.
constexpr std::int64_t kSumColumnBlockBytes = 128;
}  // namespace detail

}  // namespace tapegrad
