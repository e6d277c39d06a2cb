// Tensor construction and element access: bad sizes, values and indices are refused naming
// the sizes (docs/errors.md, "Tensors and ops").
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::thrown;

TEST_CASE("errors: construction and shape ops name the sizes", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { Tensor::from_vector({1, 2, 3}, {2, 2}, Dtype::Float64); }),
             Contains("3 values") && Contains("[2, 2]") && Contains("expected 4"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { Tensor::zeros({2, -1}); }), Contains("negative") && Contains("[2, -1]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { reshape(f64({2, 3}), {4}); }), Contains("[4]") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::out_of_range>([&] { sum(f64({2, 3}), {2}); }), Contains("axis 2") && Contains("rank 2"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { f64({2, 3}).item(); }), Contains("one element") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::out_of_range>([&] { f64({2, 3}).at(6); }), Contains("index 6") && Contains("6 elements"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { f64({2, 3}).copy_(f64({3, 2})); }),
             Contains("[3, 2]") && Contains("[2, 3]"));
  CHECK_THAT(thrown<std::logic_error>([&] { Tensor().shape(); }), Contains("undefined"));
}
