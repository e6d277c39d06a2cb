// The second-order runner on the module types tests/golden/README.md names for kind
// "double_backward" that double_backward.json does not use (Softmax, LogSoftmax,
// AdaptiveAvgPool2d): PyTorch 1.13 values from tests/fixtures/second_order/make_types.py.
#include <catch2/catch.hpp>

#include <string>

#include "golden_runner/outcome.h"
#include "golden_runner/second_order.h"
#include "golden_runner/support.h"

namespace {

using golden::json;
using tapegrad::Dtype;

const json& types_doc() {
  static const json doc =
      golden::read_json_file(std::string(TAPEGRAD_TESTS_DIR) + "/fixtures/second_order/types.json");
  return doc;
}

const json& find_case(const std::string& name) {
  for (auto& c : types_doc().at("cases"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("tests/fixtures/second_order/types.json has no case '" + name + "'");
}

// Runs one case in float64 at the file's tolerance and in float32 at 1e-4 of max(1, |want|)
// (golden_test.cpp says why).
golden::Outcome run(const std::string& name) {
  const json& c = find_case(name);
  const golden::Tolerance f64{types_doc()["tolerance"]["rtol"].get<double>(),
                              types_doc()["tolerance"]["atol"].get<double>(), false};
  golden::Outcome o;
  golden::run_second_order_case(o, name, c, Dtype::Float64, f64);
  golden::run_second_order_case(o, name + " [float32]", c, Dtype::Float32, {1e-4, 0, true});
  return o;
}

}  // namespace

TEST_CASE("second-order runner: Softmax and LogSoftmax match PyTorch", "[golden][double_backward]") {
  golden::report(run("softmax_dim1"));
  golden::report(run("log_softmax_last"));
}

TEST_CASE("second-order runner: AdaptiveAvgPool2d matches PyTorch", "[golden][double_backward]") {
  golden::report(run("adaptive_avg_pool_2x2"));
}

TEST_CASE("second-order runner: an unknown module type fails the case, naming it", "[golden][double_backward]") {
  json c = find_case("softmax_dim1");
  c["module"]["type"] = "NoSuchLayer";
  golden::Outcome o;
  golden::run_second_order_case(o, "renamed", c, Dtype::Float64, {});
  REQUIRE(o.failures.size() == 1);
  CHECK(o.failures[0] == "renamed: no factory for module type 'NoSuchLayer'");
  CHECK(o.skips.empty());
}

TEST_CASE("second-order runner: a wrong expected value fails, naming the array and element",
          "[golden][double_backward]") {
  json c = find_case("softmax_dim1");
  auto& d = c["expected"]["second"]["grad_output"]["data"];
  d[5] = d[5].get<double>() + 1e-6;
  golden::Outcome o;
  golden::run_second_order_case(o, "perturbed", c, Dtype::Float64, {1e-9, 1e-11, false});
  REQUIRE(o.failures.size() == 1);
  CHECK(o.failures[0].rfind("perturbed: second grad_output[5]: got ", 0) == 0);
}
