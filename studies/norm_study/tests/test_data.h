#pragma once
// Seeded inputs shared by norm_study's tests (in-process and MPI): features ~ N(0.3, 1.5²)
// as float64 (n, d), and class indices uniform in [0, classes) as int64 (n).
#include <cstdint>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace normstudy::testing {

inline tapegrad::Tensor random_x(tapegrad::Generator& g, std::int64_t n, std::int64_t d) {
  std::vector<double> v(static_cast<std::size_t>(n * d));
  for (auto& x : v) x = 1.5 * g.normal() + 0.3;
  return tapegrad::Tensor::from_vector(v, {n, d}, tapegrad::Dtype::Float64);
}

inline tapegrad::Tensor random_y(tapegrad::Generator& g, std::int64_t n, std::int64_t classes) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& y : v) y = static_cast<std::int64_t>(g.uniform() * static_cast<double>(classes)) % classes;
  return tapegrad::Tensor::from_int64(v, {n});
}

}  // namespace normstudy::testing
