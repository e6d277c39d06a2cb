#pragma once
// Views and slices. unsqueeze, squeeze and flatten never copy (they share storage with
// their input, like reshape); narrow/slice share storage when the selected block is
// contiguous (dim 0, or every dimension before `dim` has size 1) and copy otherwise.
// All work on float32, float64 and int64; gradients flow for the float dtypes.
// Axes may be negative (counted from the end); an axis out of range throws
// std::out_of_range naming the axis and the rank.
#include <cstdint>
#include <optional>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Inserts a size-1 dimension at `dim`, -(rank+1) <= dim <= rank: (N, C) -> (N, 1, C) for dim 1.
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
/// Removes every size-1 dimension.
Tensor squeeze(const Tensor& x);
/// Removes dimension `dim` if it has size 1; otherwise returns x unchanged (PyTorch).
Tensor squeeze(const Tensor& x, std::int64_t dim);
/// Merges dimensions start..end (inclusive) into one: (N, C, H, W) -> (N, C·H·W) for
/// flatten(x, 1). Defaults flatten everything; a scalar becomes shape (1). Throws
/// std::invalid_argument when start comes after end.
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
/// Elements start .. start+length-1 along dim (torch.narrow). start may be negative
/// (counted from the end). Throws std::out_of_range naming start, length and the size
/// when the range does not fit.
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
/// Python slicing x[..., start:end:step, ...] along dim: start/end may be negative and
/// are clamped to the size like Python's; nullopt means the beginning/end. step >= 1,
/// else std::invalid_argument.
Tensor slice(const Tensor& x, std::int64_t dim, std::optional<std::int64_t> start,
             std::optional<std::int64_t> end, std::int64_t step = 1);

}  // namespace tapegrad
