#include <tapegrad/core/shape.h>

#include <stdexcept>

namespace tapegrad {

bool numel_overflows(const Shape& s) {
  // The product of the non-zero sizes must fit too: every partial product an op takes
  // (outer and inner extents of an axis) is then safe, even where a zero size makes
  // the element count 0.
  std::int64_t n = 1;
  bool overflow = false;
  for (auto d : s) overflow |= __builtin_mul_overflow(n, d == 0 ? 1 : d, &n);
  return overflow;
}

std::int64_t numel_of(const Shape& s) {
  if (numel_overflows(s))
    throw std::invalid_argument("shape " + shape_str(s) +
                                " has more elements than a 64-bit count holds (size overflow)");
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::size_t nbytes_of(const Shape& s, std::size_t element_size) {
  for (auto d : s)
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(s));
  const std::int64_t n = numel_of(s);
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(n), element_size, &bytes))
    throw std::invalid_argument("shape " + shape_str(s) + " needs more bytes than a 64-bit count holds (size overflow)");
  return bytes;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::vector<std::int64_t> contiguous_strides(const Shape& s) {
  std::vector<std::int64_t> st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                                  " are not broadcastable (dimension " + std::to_string(i) + ": " +
                                  std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  if (numel_overflows(out))
    throw std::invalid_argument(std::string(op) + ": broadcasting shapes " + shape_str(a) + " and " + shape_str(b) +
                                " gives " + shape_str(out) +
                                ", which has more elements than a 64-bit count holds (size overflow)");
  return out;
}

std::int64_t wrap_axis(std::int64_t axis, std::int64_t rank) {
  const std::int64_t r = rank == 0 ? 1 : rank;
  if (axis < -r || axis >= r)
    throw std::out_of_range("axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                            std::to_string(rank) + " (expected -" + std::to_string(r) + " <= axis < " +
                            std::to_string(r) + ")");
  return axis < 0 ? axis + r : axis;
}

}  // namespace tapegrad
