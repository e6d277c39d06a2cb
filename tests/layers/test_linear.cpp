// Linear: inputs whose last size is not in_features, and inputs of the other dtype, are
// refused naming the expected and the actual shape or dtype (docs/errors.md, "Layers").
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/linear.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::test;  // f32, thrown
using Catch::Matchers::Contains;

TEST_CASE("errors: Linear names the expected feature count and the input shape", "[errors]") {
  layers::Linear lin(3, 5);
  CHECK_THAT(thrown<std::invalid_argument>([&] { lin(f32({2, 4})); }),
             Contains("(*, 3)") && Contains("[2, 4]") && Contains("[5, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { lin(Tensor::scalar(1.0, Dtype::Float32)); }),
             Contains("(*, 3)") && Contains("[]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { lin(Tensor::ones({2, 3}, Dtype::Float64)); }),
             Contains("dtype mismatch") && Contains("float64") && Contains("float32"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { layers::Linear(-1, 5); }), Contains("in_features=-1"));
  // Any number of leading dims is fine, as in PyTorch: (*, in) -> (*, out).
  CHECK(lin(f32({4, 2, 3})).shape() == Shape{4, 2, 5});
}
