// Reductions over zero values: a mean over an empty axis is refused where PyTorch returns
// NaN; sums and linear maps of an empty batch work (docs/errors.md, "Tensors and ops").
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/losses.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::thrown;

TEST_CASE("errors: empty inputs are refused where a mean over zero values would be NaN", "[errors]") {
  // PyTorch returns NaN for these; tapegrad refuses them with a message naming the shape.
  CHECK_THAT(thrown<std::invalid_argument>([&] { mean(f64({0, 3}), {0}); }), Contains("zero") && Contains("[0, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { layers::mse_loss(f64({0}), f64({0})); }), Contains("empty"));
  // What is well defined on an empty batch still works: sums, elementwise ops, linear.
  CHECK(sum(f64({0, 3}), {0}).to_vector() == std::vector<double>{0, 0, 0});
  CHECK(linear(f64({0, 3}), f64({2, 3}), f64({2})).shape() == Shape{0, 2});
}
