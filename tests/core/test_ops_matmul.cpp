// matmul and linear: operands whose inner sizes differ are refused naming both shapes
// (docs/errors.md, "Tensors and ops").
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::thrown;

TEST_CASE("errors: matmul names both shapes", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { matmul(f64({2, 3}), f64({4, 5})); }),
             Contains("matmul") && Contains("[2, 3]") && Contains("[4, 5]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { matmul(f64({3}), f64({3, 2})); }),
             Contains("matmul") && Contains("[3]") && Contains("[3, 2]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { linear(f64({2, 4}), f64({5, 3}), Tensor()); }),
             Contains("linear") && Contains("(*, 3)") && Contains("[2, 4]") && Contains("[5, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { linear(f64({2, 3}), f64({5, 3}), f64({4})); }),
             Contains("bias") && Contains("(5)") && Contains("[4]"));
}
