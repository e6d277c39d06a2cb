// Products of sizes: every shape built from user values (reshape, broadcasting, views) is
// refused when the product of its NON-ZERO sizes overflows int64, zeros or not, because a
// later view or flatten multiplies the sizes it keeps (core/shape.h, numel_overflows); tensors
// whose element or byte count overflows, narrow/slice bounds, reshape, broadcast and cat.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <new>

#include <tapegrad/core/core.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::thrown;

namespace {
constexpr std::int64_t kBig = std::int64_t(1) << 31;
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

TEST_CASE("reliability: a shape whose element or byte count overflows is refused, naming it", "[errors][reliability]") {
  // 2^31 · 2^31 = 2^62 elements: the byte count (2^64 for float32) wraps to 0
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::ones({kBig, kBig}); }),
             Contains("[2147483648, 2147483648]") && Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::zeros({kMax, 2}, Dtype::Float64); }),
             Contains("[9223372036854775807, 2]") && Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::empty({kBig, kBig, kBig}); }), Contains("overflow"));
  // a count that fits but cannot be allocated is std::bad_alloc, not a crash
  CHECK_THROWS_AS(Tensor::empty({std::int64_t(1) << 60}, Dtype::Float32), std::bad_alloc);
  // a zero size makes the count 0, but the other sizes must still multiply without
  // overflow (every op takes partial products such as the extent before an axis)
  CHECK(Tensor::zeros({kBig, 0, 4}).numel() == 0);
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::zeros({kMax, 0, kMax}); }), Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::from_vector({1.0}, {kBig, kBig, 4}, Dtype::Float64); }), Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Tensor::full({-1, 3}, 1.0); }), Contains("[-1, 3]"));
}

TEST_CASE("reliability: narrow and slice bounds cannot overflow", "[errors][reliability]") {
  const Tensor x = f64({2, 3});
  CHECK_THAT(thrown<std::out_of_range>([&] { narrow(x, 1, 1, kMax); }),
             Contains("narrow") && Contains("9223372036854775807") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::out_of_range>([&] { narrow(x, 1, kMax, 1); }), Contains("narrow"));
  CHECK_THAT(thrown<std::out_of_range>([&] { narrow(x, 0, std::numeric_limits<std::int64_t>::min(), 1); }),
             Contains("narrow"));
  // slice clamps like Python; extreme ends and steps give the clamped result
  CHECK(slice(x, 1, std::numeric_limits<std::int64_t>::min(), kMax, kMax).shape() == Shape{2, 1});
  CHECK(slice(x, 1, kMax, std::numeric_limits<std::int64_t>::min()).shape() == Shape{2, 0});
  CHECK(slice(x, 1, 1, kMax, 2).to_vector() == std::vector<double>{1, 1});
}

TEST_CASE("reliability: reshape, flatten and broadcasting refuse overflowing shapes", "[errors][reliability]") {
  const Tensor x = f64({4});
  // 4 · (2^62 + 1) wraps to 4: accepted, it would make a view far past the storage
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {4, (std::int64_t(1) << 62) + 1}); }),
             Contains("reshape") && Contains("overflow"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {kBig, kBig, kBig, 4}); }), Contains("reshape"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(x, {-1, kBig, kBig, kBig}); }), Contains("reshape"));
  CHECK(reshape(x, {-1, 2}).shape() == Shape{2, 2});
  const Tensor e = f64({0, 4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(e, {-1, 0}); }), Contains("reshape"));
  // an expand/broadcast to a huge shape: refused before anything is allocated
  CHECK_THAT(thrown<std::invalid_argument>([&] { broadcast_to(f64({1, 1}), {kBig, kBig}); }), Contains("overflow"));
  // cat: sizes along the joined dimension that add up past int64
  const Tensor wide = Tensor::empty({0, kMax / 2 + 1});
  CHECK_THAT(thrown<std::invalid_argument>([&] { cat({wide, wide}, 1); }), Contains("cat") && Contains("overflow"));
}
