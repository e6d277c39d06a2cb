// Products of sizes in the layers: Unflatten's sizes and conv2d's output and unfolded-input
// sizes are refused when the product of their NON-ZERO sizes overflows int64, zeros or not
// (core/shape.h, numel_overflows).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/functional/conv.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;
namespace F = tapegrad::layers::functional;

namespace {
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}

TEST_CASE("size overflow: Unflatten refuses sizes whose non-zero product overflows, zeros or not",
          "[errors][reliability]") {
  const Tensor x = Tensor::zeros({2, 0});
  layers::Unflatten u(1, {0, kMax, 2});
  CHECK_THAT(thrown<std::invalid_argument>([&] { u.forward(x); }),
             Contains("Unflatten") && Contains("[0, 9223372036854775807, 2]") && Contains("64 bits"));
  // the output shape as a whole: [2^40, 0, 2^30] has a non-zero product of 2^70
  const Tensor big = Tensor::zeros({std::int64_t{1} << 40, 0});
  layers::Unflatten u2(1, {0, std::int64_t{1} << 30});
  CHECK_THAT(thrown<std::invalid_argument>([&] { u2.forward(big); }),
             Contains("Unflatten") && Contains("[1099511627776, 0, 1073741824]") && Contains("size overflow"));
  // still allowed: the non-zero product fits, and a flatten after it is exact
  layers::Unflatten ok(1, {0, kMax / 2});
  const Tensor y = ok.forward(x);
  CHECK(y.shape() == Shape{2, 0, kMax / 2});
  layers::Flatten fl(1, 2);
  CHECK(fl.forward(y).shape() == Shape{2, 0});
}

TEST_CASE("size overflow: conv2d refuses an output whose non-zero sizes overflow, naming conv2d",
          "[errors][reliability][conv]") {
  // N = 0 hides nothing: (2^32 + 1) x (2^32 + 1) output positions overflow the unfolded input
  const std::int64_t p = std::int64_t{1} << 31;
  const Tensor x = Tensor::zeros({0, 1, 1, 1}), w = Tensor::zeros({1, 1, 1, 1});
  CHECK_THAT(thrown<std::invalid_argument>([&] { F::conv2d(x, w, Tensor(), 1, p); }),
             Contains("conv2d") && Contains("size overflow") && Contains("[0, 1, 4294967297, 4294967297]"));
  const Tensor w0 = Tensor::zeros({0, 1, 1, 1});
  CHECK_THAT(thrown<std::invalid_argument>([&] { F::conv2d(Tensor::zeros({2, 1, 1, 1}), w0, Tensor(), 1, p); }),
             Contains("conv2d") && Contains("size overflow"));
}
