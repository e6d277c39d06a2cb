#pragma once
// Helpers shared by the tests: seeded float64 random tensors and the relative-or-absolute
// closeness check most value tests use.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/tapegrad.h"

namespace tapegrad::test {

/// Uniform(lo, hi) float64 tensor of shape s from Generator(seed); no grad.
inline Tensor rand64(const Shape& s, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  return uniform(s, lo, hi, Dtype::Float64, g);
}

/// |got - want| <= tol·max(1, |want|) at every element (so tol is absolute below 1 and
/// relative above), with equal element counts; NaN in got fails. Reports the first
/// offending element.
inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = got.size();
  for (std::size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])))) bad = i;
  INFO("element " << bad << ": got " << (bad < got.size() ? got[bad] : 0) << ", want "
                  << (bad < got.size() ? want[bad] : 0));
  REQUIRE(bad == got.size());
}

/// The same check on a tensor's values against a flat list (row-major).
inline void require_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  require_close(got.to_vector(), want, tol);
}

/// The same check between two tensors, which must have the same shape.
inline void require_close(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  REQUIRE(got.shape() == want.shape());
  require_close(got.to_vector(), want.to_vector(), tol);
}

}  // namespace tapegrad::test
