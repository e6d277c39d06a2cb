// models::CNN's norm factory: called per conv block and for the head, in layer order, with
// the weights drawn as the built-in choice draws them.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/models/cnn.h>

using namespace tapegrad;

TEST_CASE("CNN norm_factory: called per conv block and for the head, in layer order", "[models][cnn]") {
  tapegrad::ModeChecksPause pause;  // fresh statistics evaluated on purpose
  struct Call {
    std::int64_t features;
    bool conv;
    Shape shape;
  };
  std::vector<Call> calls;
  models::CNNOptions o;
  o.height = o.width = 8;
  o.channels = {3, 4};
  o.hidden = 5;
  o.dtype = Dtype::Float64;
  o.norm_factory = [&](std::int64_t f, bool conv, const Shape& s) -> layers::ModulePtr {
    calls.push_back({f, conv, s});
    if (!conv) return nullptr;  // no head norm
    layers::BatchNormOptions bo;
    bo.dtype = Dtype::Float64;
    return std::make_shared<layers::BatchNorm2d>(f, bo);
  };
  Generator g(3);
  models::CNN net(o, g);
  REQUIRE(calls.size() == 3);
  CHECK(calls[0].features == 3);
  CHECK(calls[0].conv);
  CHECK(calls[0].shape == Shape{3, 8, 8});
  CHECK(calls[1].shape == Shape{4, 4, 4});
  CHECK(calls[2].features == 5);
  CHECK_FALSE(calls[2].conv);
  CHECK(calls[2].shape == Shape{5});
  // conv, bn, relu, pool, conv, bn, relu, pool, flatten, linear, relu, linear
  std::vector<std::string> types;
  for (auto& [name, m] : net.named_children()) types.push_back(m->type_name());
  CHECK(types == std::vector<std::string>{"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Conv2d", "BatchNorm2d", "ReLU",
                                          "MaxPool2d", "Flatten", "Linear", "ReLU", "Linear"});
  // the same weights as the built-in batch norm choice (weights drawn in layer order)
  models::CNNOptions b = o;
  b.norm_factory = nullptr;
  b.norm = models::ConvNorm::Batch;
  Generator g2(3);
  models::CNN builtin(b, g2);
  CHECK(net.parameters()[0].to_vector() == builtin.parameters()[0].to_vector());
  const Tensor x = Tensor::from_vector(std::vector<double>(2 * 64, 0.5), {2, 1, 8, 8}, Dtype::Float64);
  net.eval();
  CHECK(net(x).shape() == Shape{2, 10});
}
