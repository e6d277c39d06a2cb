#include <tapegrad/debug/row_selection.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tapegrad::debug {

Tensor take_rows(const Tensor& x, const std::vector<std::int64_t>& rows) {
  if (!x.defined() || x.dim() < 1)
    throw std::invalid_argument("take_rows: expected a tensor with a batch dimension, got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  Shape s = x.shape();
  const std::int64_t n = s[0];
  s[0] = static_cast<std::int64_t>(rows.size());
  Tensor out = Tensor::empty(s, x.dtype());
  const std::size_t row_bytes = n > 0 ? x.nbytes() / static_cast<std::size_t>(n) : 0;
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n)
      throw std::out_of_range("take_rows: row " + std::to_string(rows[i]) + " is outside [0, " + std::to_string(n) +
                              ") for a tensor of shape " + shape_str(x.shape()));
    std::memcpy(dst + i * row_bytes, src + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes);
  }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw std::invalid_argument("max_abs_diff: shapes differ: " + shape_str(a.shape()) + " vs " + shape_str(b.shape()));
  const auto va = a.to_vector(), vb = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const double d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace tapegrad::debug
