// Hostile sizes for convolution, pooling, Unflatten and CNN: sizes near the int64 limits
// must give an error naming the values, never a wrapped-around size, a wrong result or
// undefined behaviour (these cases overflowed signed 64-bit arithmetic under UBSan).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/pooling.h>
#include <tapegrad/models/cnn.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Matchers::Contains;
using test::f32;
using test::thrown;

namespace {
constexpr std::int64_t kBig = std::numeric_limits<std::int64_t>::max();
}

TEST_CASE("errors: conv2d with a padding, dilation or stride near the int64 limit names the values", "[errors][conv]") {
  const Tensor x = f32({1, 1, 5, 5}), w = f32({1, 1, 3, 3});
  const std::string pad = thrown<std::invalid_argument>([&] { functional::conv2d(x, w, Tensor(), 1, kBig / 2); });
  CHECK_THAT(pad, Contains("conv2d: expected the padded input size, the dilated kernel size and the stride below 2^62"));
  CHECK_THAT(pad, Contains("padding (4611686018427387903, 4611686018427387903)"));
  CHECK_THAT(pad, Contains("input [1, 1, 5, 5]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { functional::conv2d(x, w, Tensor(), 1, kBig); }),
             Contains("padding (9223372036854775807, 9223372036854775807)"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { functional::conv2d(x, w, Tensor(), 1, 0, kBig / 2); }),
             Contains("dilation (4611686018427387903, 4611686018427387903)"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { functional::conv2d(x, w, Tensor(), {1, kBig}, 1); }),
             Contains("stride (1, 9223372036854775807)"));
  // a large stride below the limit still works: one output position per dim, the padded corner
  const Tensor y = functional::conv2d(x, w, Tensor(), std::int64_t{1} << 40, 1);
  REQUIRE(y.shape() == Shape{1, 1, 1, 1});
  CHECK(y.item() == 4.0);  // the top-left 3x3 window with padding 1 covers 2x2 ones
}

TEST_CASE("errors: conv_output_size refuses a result that does not fit in 64 bits", "[errors][conv]") {
  CHECK(functional::conv_output_size(5, 3, 1, 1, 1) == 5);
  CHECK_THAT(thrown<std::invalid_argument>([] { functional::conv_output_size(kBig, 1, 1, kBig, 1); }),
             Contains("padding=9223372036854775807"));
}

TEST_CASE("errors: pooling with a kernel, padding, dilation or stride near the int64 limit names the values",
          "[errors][pooling]") {
  const Tensor x = f32({1, 1, 5, 5});
  const std::string k = thrown<std::invalid_argument>(
      [&] { functional::max_pool2d(x, kBig, std::nullopt, kBig / 2, 1, false); });
  CHECK_THAT(k, Contains("max_pool2d: expected the padded input size, the dilated kernel size and the stride below 2^62"));
  CHECK_THAT(k, Contains("kernel_size (9223372036854775807, 9223372036854775807)"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { functional::max_pool2d(x, 2, std::nullopt, 0, kBig, false); }),
             Contains("dilation (9223372036854775807, 9223372036854775807)"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { functional::avg_pool2d(x, 2, functional::Size2(kBig), 0, true, true); }),
             Contains("avg_pool2d: expected the padded input size"));
}

TEST_CASE("errors: Unflatten refuses negative sizes and a product that overflows", "[errors]") {
  const Tensor x = f32({2, 6});
  CHECK(thrown<std::invalid_argument>([&] { Unflatten(1, Shape{-2, -3}).forward(x); }) ==
        "Unflatten: expected sizes >= 0 in unflattened_size, got [-2, -3]");
  CHECK(thrown<std::invalid_argument>([&] { Unflatten(1, Shape{kBig, 2}).forward(x); }) ==
        "Unflatten: expected an unflattened_size whose product fits in 64 bits, got [9223372036854775807, 2]");
  CHECK(Unflatten(1, Shape{2, 3}).forward(x).shape() == Shape{2, 2, 3});
}

TEST_CASE("errors: CNN whose flattened size overflows names the sizes", "[errors][cnn]") {
  models::CNNOptions o;
  o.height = o.width = kBig;
  o.channels = {2};
  CHECK_THAT(thrown<std::invalid_argument>([&] { models::CNN m(o); }),
             Contains("CNN: expected a flattened size C·H·W that fits in 64 bits, got 2·4611686018427387903·"
                      "4611686018427387903"));
}
