// Module::to: a model converted to another dtype (BatchNorm's buffers included) stays
// consistent, and the optimizer state follows on its next step.
#include <catch2/catch.hpp>

#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/adam.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

TEST_CASE("reliability: Module::to(Float64) converts BatchNorm and the optimizer state follows",
          "[errors][reliability]") {
  Generator gen(3);
  auto lin = std::make_shared<layers::Linear>(4, 3, true, Dtype::Float32, gen);
  auto bn = std::make_shared<layers::BatchNorm1d>(3);
  layers::Sequential model({lin, bn});
  optim::Adam adam(model.parameters(), {.lr = 0.1});
  const Tensor x32 = Tensor::from_vector({1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 0, 1}, {3, 4}, Dtype::Float32);
  sum(square(model.forward(x32))).backward();
  adam.step();  // float32 state exists now
  model.zero_grad();

  model.to(Dtype::Float64);
  for (auto& [n, t] : model.named_parameters()) CHECK(t.dtype() == Dtype::Float64);
  CHECK(bn->running_mean.dtype() == Dtype::Float64);
  CHECK(bn->running_var.dtype() == Dtype::Float64);
  CHECK(bn->num_batches_tracked.dtype() == Dtype::Int64);
  const Tensor x64 = x32.to(Dtype::Float64);
  Tensor y = model.forward(x64);  // accepted: the module is float64 now
  CHECK(y.dtype() == Dtype::Float64);
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn->forward(Tensor::ones({3, 3}, Dtype::Float32)); }),
             Contains("BatchNorm1d") && Contains("input dtype float32") && Contains("module's float64"));
  sum(square(y)).backward();
  adam.step();  // the float32 moments are converted, not refused
  const auto st = adam.state_dict();
  CHECK(st.at("state.0.exp_avg").dtype() == Dtype::Float64);
  CHECK(st.at("state.0.step").data<std::int64_t>()[0] == 2);
  bn->eval();
  CHECK(model.forward(x64).dtype() == Dtype::Float64);
  // and back to float32: still consistent
  model.to(Dtype::Float32);
  bn->train();
  model.zero_grad();
  sum(square(model.forward(x32))).backward();
  adam.step();
  CHECK(adam.state_dict().at("state.1.exp_avg_sq").dtype() == Dtype::Float32);
}
