#pragma once
// Shapes: a list of dimension sizes, row-major (last index fastest).
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace tapegrad {

/// Sizes per dimension, outermost first ({} is a scalar, {N, C} a batch of rows).
using Shape = std::vector<std::int64_t>;

/// True when the product of the NON-ZERO sizes of s overflows int64. Every tensor shape must
/// pass this (numel_of refuses it): a view, flatten or split multiplies the sizes it keeps, so
/// a zero size elsewhere must not hide an overflow. The one check every product of sizes
/// taken from user values (a reshape, an unflatten, a broadcast, a file's shape) goes through.
bool numel_overflows(const Shape& s);
/// ⌈n / d⌉ for n >= 0, d >= 1, without the sum n + d - 1 (which overflows for a d near
/// INT64_MAX: a batch size given by the user). The one rounding-up division of counts.
constexpr std::int64_t ceil_div(std::int64_t n, std::int64_t d) { return n / d + (n % d != 0 ? 1 : 0); }
/// Product of the sizes (1 for a scalar, shape {}; 0 when any size is 0). Throws
/// std::invalid_argument naming the shape when numel_overflows(s).
std::int64_t numel_of(const Shape& s);
/// numel_of(s) · element_size, in bytes. Throws std::invalid_argument naming the shape for
/// a negative size or when the count overflows.
std::size_t nbytes_of(const Shape& s, std::size_t element_size);
/// "[2, 3]" style text, used in every shape error message.
std::string shape_str(const Shape& s);
/// Row-major strides in elements.
std::vector<std::int64_t> contiguous_strides(const Shape& s);
/// NumPy/PyTorch broadcasting of two shapes. Throws std::invalid_argument naming
/// both shapes (and `op`) when they are not broadcastable.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Wraps a possibly negative axis into [0, rank); throws std::out_of_range naming the
/// axis and the rank.
std::int64_t wrap_axis(std::int64_t axis, std::int64_t rank);

}  // namespace tapegrad
