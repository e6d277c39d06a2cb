#include "kit/data.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>

namespace studies::kit {

using tapegrad::Tensor;

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_chapter_rows(tapegrad::Generator& gen, std::int64_t n, std::int64_t f, double noise, Tensor& x, Tensor& y) {
  x = Tensor::empty({n, f}, tapegrad::Dtype::Float32);
  y = Tensor::empty({n, 1}, tapegrad::Dtype::Float32);
  float* px = x.data<float>();
  float* py = y.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < f; ++j) px[i * f + j] = static_cast<float>(gen.normal());
    const double x0 = px[i * f], x1 = px[i * f + 1];
    py[i] = static_cast<float>(chapter_target(x0, x1, gen.normal(), noise));
  }
}

Dataset make_chapter_data(std::uint64_t seed, std::int64_t n_train, std::int64_t n_test, std::int64_t features,
                          double noise) {
  if (features < 2) throw std::invalid_argument("make_chapter_data: need >= 2 features, got " + std::to_string(features));
  if (n_train < 1 || n_test < 0)
    throw std::invalid_argument("make_chapter_data: need n_train >= 1 and n_test >= 0, got " +
                                std::to_string(n_train) + ", " + std::to_string(n_test));
  tapegrad::Generator gen(derive_seed(seed, 0));
  Dataset d;
  fill_chapter_rows(gen, n_train, features, noise, d.x_train, d.y_train);
  fill_chapter_rows(gen, n_test, features, noise, d.x_test, d.y_test);
  return d;
}

}  // namespace studies::kit
