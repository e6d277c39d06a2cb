// Errors raised inside a container's child name the module path and the model's input
// shape: "in module '1' (BatchNorm1d): ... (model input: [10])", with
// the original exception type. PyTorch does not do this.
#include <catch2/catch.hpp>

#include <stdexcept>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/models/mlp.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using tapegrad::test::thrown;

namespace {

// A layer that throws an exception type of its own.
struct MyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Thrower : layers::Module {
  Tensor forward(const Tensor&) override { throw MyError("custom failure"); }
  std::string type_name() const override { return "Thrower"; }
};

}  // namespace

TEST_CASE("an error inside an MLP names the module path and the shape the user passed",
          "[errors][reliability][module_path]") {
  Generator g(1);
  models::MLPOptions o;
  o.norm = models::Norm::Batch;
  models::MLP mlp({10, 64, 3}, o, g);
  // A single row without its batch dimension: Linear accepts [10] and gives [64], and the
  // BatchNorm1d behind it is the one that refuses.
  const std::string msg = thrown<std::invalid_argument>([&] { mlp(Tensor::ones({10})); });
  CHECK_THAT(msg, StartsWith("in module '1' (BatchNorm1d): "));
  CHECK_THAT(msg, Contains("[64]") && Contains("(model input: [10])"));
}

TEST_CASE("nested containers join the child names into a dotted path", "[errors][reliability][module_path]") {
  Generator g(2);
  auto features = std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{
      std::make_shared<layers::Linear>(4, 6, true, Dtype::Float32, g), std::make_shared<layers::ReLU>(),
      std::make_shared<layers::BatchNorm1d>(5)});  // wrong width on purpose
  layers::Sequential model{features, std::make_shared<layers::Linear>(6, 2, true, Dtype::Float32, g)};
  const std::string msg = thrown<std::invalid_argument>([&] { model(Tensor::ones({3, 4})); });
  CHECK_THAT(msg, StartsWith("in module '0.2' (BatchNorm1d): "));
  CHECK_THAT(msg, Contains("(model input: [3, 4])"));
  // only the outermost container adds the input shape, once
  CHECK(msg.find("model input") == msg.rfind("model input"));

  // called directly, the inner container reports from its own point of view
  const std::string inner = thrown<std::invalid_argument>([&] { (*features)(Tensor::ones({3, 4})); });
  CHECK_THAT(inner, StartsWith("in module '2' (BatchNorm1d): "));
}

TEST_CASE("an exception type the container does not know passes through unchanged",
          "[errors][reliability][module_path]") {
  layers::Sequential model{std::make_shared<layers::ReLU>(), std::make_shared<Thrower>()};
  try {
    model(Tensor::ones({2}));
    FAIL("no exception");
  } catch (const MyError& e) {
    CHECK(std::string(e.what()) == "custom failure");
  }
}
