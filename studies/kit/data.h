#pragma once
// The chapter's synthetic regression data: y = sin(2·x0) + cos(x1) + 0.1·ε.
#include <cmath>
#include <cstdint>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace studies::kit {

/// Train and test split: x (N, F) float32, y (N, 1) float32.
struct Dataset {
  tapegrad::Tensor x_train, y_train, x_test, y_test;
};

/// X ~ N(0, 1) of shape (N, features); y = sin(2·x0) + cos(x1) + noise·ε, ε ~ N(0, 1).
/// Draws the train set then the test set from one generator seeded with `seed`, row by row
/// (features of a row, then its ε). Defaults are the chapter's: 200 train, 100 test,
/// 50 features, noise 0.1. Throws std::invalid_argument for features < 2 or n_train < 1.
Dataset make_chapter_data(std::uint64_t seed, std::int64_t n_train = 200, std::int64_t n_test = 100,
                          std::int64_t features = 50, double noise = 0.1);

/// The chapter's target for a sample with features x0, x1 and noise draw ε:
/// sin(2·x0) + cos(x1) + noise·ε.
inline double chapter_target(double x0, double x1, double eps, double noise = 0.1) {
  return std::sin(2.0 * x0) + std::cos(x1) + noise * eps;
}

/// Fills x (n, features) and y (n, 1), float32, from gen, row by row: the features of a
/// row (N(0, 1)), then its ε; y = sin(2·x0) + cos(x1) + noise·ε. The one generator of the
/// chapter's data (make_chapter_data, the mode-bug measurements and the benchmarks use it).
void fill_chapter_rows(tapegrad::Generator& gen, std::int64_t n, std::int64_t features, double noise,
                       tapegrad::Tensor& x, tapegrad::Tensor& y);

/// SplitMix64: derives independent stream seeds from one run seed (seed, stream).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream);

}  // namespace studies::kit
