#pragma once
// Helpers shared by the tests/test_ops_*.cpp and test_losses.cpp files.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include <tapegrad/core/core.h>
#include "test_support.h"

namespace ops_test {

using namespace tapegrad;

inline Tensor leaf(const std::vector<double>& v, const Shape& s) {
  Tensor t = Tensor::from_vector(v, s, Dtype::Float64);
  t.requires_grad_();
  return t;
}

/// Uniform(lo, hi) float64 leaf requiring grad.
inline Tensor rand_leaf(const Shape& s, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t = tapegrad::test::rand64(s, seed, lo, hi);
  t.requires_grad_();
  return t;
}

inline void require_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& in) {
  auto r = gradcheck(f, in);
  INFO(r.message);
  REQUIRE(r.ok);
}

/// gradgradcheck (the second derivative through create_graph) must pass.
inline void require_gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                  const std::vector<Tensor>& in) {
  auto r = gradgradcheck(f, in);
  INFO(r.message);
  REQUIRE(r.ok);
}

/// |got - want| <= atol + rtol·|want| element-wise, with equal element counts.
inline void require_close(const Tensor& got, const std::vector<double>& want, double rtol = 1e-12,
                          double atol = 1e-14) {
  REQUIRE(got.defined());
  const auto v = got.to_vector();
  REQUIRE(v.size() == want.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": got " << v[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      REQUIRE(std::isnan(v[i]));
    } else if (std::isinf(want[i])) {
      REQUIRE(v[i] == want[i]);
    } else {
      REQUIRE(std::abs(v[i] - want[i]) <= atol + rtol * std::abs(want[i]));
    }
  }
}

inline std::vector<double> seq(std::int64_t n, double start = 0.0, double step = 1.0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>(i);
  return v;
}

}  // namespace ops_test
