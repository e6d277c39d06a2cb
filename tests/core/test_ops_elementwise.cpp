// The binary elementwise ops' argument checks: shapes that do not broadcast and mixed dtypes
// are refused with a message naming both (docs/errors.md, "Tensors and ops").
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::f64;
using tapegrad::test::thrown;

TEST_CASE("errors: every binary op names both shapes when they do not broadcast", "[errors]") {
  const Tensor a = f64({2, 3}), b = f64({4});
  CHECK_THAT(thrown<std::invalid_argument>([&] { add(a, b); }),
             Contains("add") && Contains("[2, 3]") && Contains("[4]") && Contains("not broadcastable"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { sub(a, b); }), Contains("sub") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { mul(a, b); }), Contains("mul") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { div(a, b); }), Contains("div") && Contains("[2, 3]") && Contains("[4]"));
  // The offending dimension is named too: dim 1 of the aligned shapes, 3 vs 4.
  CHECK_THAT(thrown<std::invalid_argument>([&] { add(a, b); }), Contains("dimension 1: 3 vs 4"));
  // Broadcasting that PyTorch accepts is accepted: (2, 3) + (3) and (2, 1) * (1, 3).
  CHECK(add(a, f64({3})).shape() == Shape{2, 3});
  CHECK(mul(f64({2, 1}), f64({1, 3})).shape() == Shape{2, 3});
}

TEST_CASE("errors: mixing float32 and float64 names both dtypes", "[errors]") {
  const Tensor a = Tensor::ones({2, 3}, Dtype::Float32), b = Tensor::ones({2, 3}, Dtype::Float64);
  for (auto op : {+[](const Tensor& x, const Tensor& y) { return add(x, y); },
                  +[](const Tensor& x, const Tensor& y) { return mul(x, y); }})
    CHECK_THAT(thrown<std::invalid_argument>([&] { op(a, b); }),
               Contains("dtype mismatch") && Contains("float32") && Contains("float64"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { matmul(a, Tensor::ones({3, 2}, Dtype::Float64)); }),
             Contains("matmul") && Contains("float32") && Contains("float64"));
  // int64 tensors hold indices and counters; arithmetic on them is refused.
  CHECK_THAT(thrown<std::invalid_argument>([&] { relu(Tensor::zeros({2}, Dtype::Int64)); }),
             Contains("float32 or float64") && Contains("int64"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { a.data<double>(); }), Contains("float32") && Contains("float64"));
}
