#pragma once
// The chapter's synthetic regression data.
#include <cstdint>

#include "core/tensor.h"

namespace bnexp {

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

/// SplitMix64: derives independent stream seeds from one run seed (seed, stream).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream);

}  // namespace bnexp
