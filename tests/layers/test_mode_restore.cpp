// layers::ModeRestore (every module's own train/eval mode back at scope exit) and
// layers::hooks::ScopedForwardHook (a forward hook for one scope).
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/hooks.h>
#include <tapegrad/layers/sequential.h>

using namespace tapegrad;

TEST_CASE("ModeRestore: every module gets its own mode back, also after a throw", "[module]") {
  auto inner = std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{
      std::make_shared<layers::ReLU>(), std::make_shared<layers::ReLU>()});
  layers::Sequential net{std::make_shared<layers::ReLU>(), inner};
  net.train();
  inner->eval();
  (*inner)[1]->train();  // train, eval, train: a parent's train() alone cannot give these back
  {
    layers::ModeRestore restore(net);
    net.eval();
  }
  REQUIRE(net.is_training());
  REQUIRE(net[0]->is_training());
  REQUIRE_FALSE(inner->is_training());
  REQUIRE_FALSE((*inner)[0]->is_training());
  REQUIRE((*inner)[1]->is_training());
  try {
    layers::ModeRestore restore(net);
    net.train();
    throw std::runtime_error("inside");
  } catch (const std::runtime_error&) {
  }
  REQUIRE_FALSE(inner->is_training());
  REQUIRE((*inner)[1]->is_training());
}

TEST_CASE("ScopedForwardHook: the hook runs inside its scope only", "[module]") {
  layers::ReLU relu;
  const Tensor x = Tensor::from_vector({-1, 2}, {2}, Dtype::Float32);
  int calls = 0;
  {
    layers::hooks::ScopedForwardHook hook([&](layers::Module& m, const Tensor&, const Tensor&) {
      if (&m == &relu) ++calls;
    });
    relu(x);
  }
  relu(x);
  REQUIRE(calls == 1);
}
