// Products of sizes: every shape built from user values (reshape, broadcasting, views) is
// refused when the product of its NON-ZERO sizes overflows int64, zeros or not, because a
// later view or flatten multiplies the sizes it keeps (core/shape.h, numel_overflows).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include <tapegrad/core/core.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}

TEST_CASE("size overflow: numel_overflows looks at the non-zero sizes", "[errors][reliability]") {
  CHECK_FALSE(numel_overflows({}));
  CHECK_FALSE(numel_overflows({0, kMax}));
  CHECK_FALSE(numel_overflows({2, 0, kMax / 2}));
  CHECK(numel_overflows({2, 0, kMax / 2 + 1}));
  CHECK(numel_overflows({0, kMax, 2}));
  CHECK(numel_of({3, 0, kMax / 3}) == 0);
  CHECK_THAT(thrown<std::invalid_argument>([] { numel_of({0, kMax, 2}); }),
             Contains("[0, 9223372036854775807, 2]") && Contains("size overflow"));
}

TEST_CASE("size overflow: reshape to a shape whose non-zero sizes overflow is refused, zeros or not",
          "[errors][reliability]") {
  const Tensor x = Tensor::zeros({2, 0});
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {2, 0, kMax, 2}); }),
             Contains("reshape") && Contains("[2, 0, 9223372036854775807, 2]") && Contains("size overflow") &&
                 Contains("[2, 0]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {0, -1, kMax, 2}); }), Contains("reshape"));
  // the largest allowed: the non-zero product fits
  const Tensor y = reshape(x, {2, 0, kMax / 2});
  CHECK(y.shape() == Shape{2, 0, kMax / 2});
  CHECK(flatten(y, 1).shape() == Shape{2, 0});
  CHECK(flatten(y, 0).shape() == Shape{0});
}

TEST_CASE("size overflow: broadcasting to a shape whose non-zero sizes overflow names the op",
          "[errors][reliability]") {
  const Tensor a = Tensor::zeros({0, std::int64_t{1} << 62, 1});
  const Tensor b = Tensor::zeros({1, 1, 4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { add(a, b); }),
             Contains("add") && Contains("[0, 4611686018427387904, 1]") && Contains("[1, 1, 4]") &&
                 Contains("size overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { broadcast_shapes({0, std::int64_t{1} << 62, 1}, {4}, "mul"); }),
             Contains("mul") && Contains("[0, 4611686018427387904, 4]"));
  CHECK(broadcast_shapes({0, std::int64_t{1} << 60, 1}, {4}, "mul") == Shape{0, std::int64_t{1} << 60, 4});
}
