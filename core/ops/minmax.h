#pragma once
// Comparisons and arg-reductions.
//
// maximum/minimum are binary with NumPy/PyTorch broadcasting (shape errors name both
// shapes). max/min/argmax/argmin reduce one axis `dim` (negative counts from the end)
// of an (outer, R, inner) view; keepdim keeps it as a size-1 dimension. Ties go to the
// first index; NaN counts as larger (and smaller) than everything, so it propagates.
// Reducing an empty axis throws std::invalid_argument; an axis out of range throws
// std::out_of_range naming the axis and the rank.
#include <cstdint>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Element-wise max(a, b) with broadcasting; NaN propagates. Gradient as PyTorch: the
/// larger input gets g, a tie splits it g/2 each.
Tensor maximum(const Tensor& a, const Tensor& b);
/// Element-wise min(a, b) with broadcasting; NaN propagates; a tie splits g/2 each.
Tensor minimum(const Tensor& a, const Tensor& b);

/// Values of torch.max(x, dim, keepdim); the gradient flows only to the arg position.
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Values of torch.min(x, dim, keepdim); the gradient flows only to the arg position.
Tensor min(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// int64 index of the (first) largest element along dim; any dtype; not differentiable.
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// int64 index of the (first) smallest element along dim.
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Flat index (shape {}) of the first largest element of the whole tensor.
Tensor argmax(const Tensor& x);
/// Flat index (shape {}) of the first smallest element of the whole tensor.
Tensor argmin(const Tensor& x);

}  // namespace tapegrad
