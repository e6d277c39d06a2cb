// Factories for the skeleton's layers and losses (optimizers: factories_optim.cpp).
#include <memory>

#include "golden_runner/support.h"
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>

namespace golden {
namespace {

using namespace tapegrad;


const bool registered = [] {
  add_module("Linear", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::Linear>(a.at("in_features").get<std::int64_t>(),
                                            a.at("out_features").get<std::int64_t>(), a.value("bias", true), dt);
  });
  add_module("ReLU", [](const json&, Dtype) -> layers::ModulePtr { return std::make_shared<layers::ReLU>(); });
  add_module("BatchNorm1d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::BatchNorm1d>(a.at("num_features").get<std::int64_t>(), bn_options(a, dt));
  });
  add_module("BatchNorm2d", [](const json& a, Dtype dt) -> layers::ModulePtr {
    return std::make_shared<layers::BatchNorm2d>(a.at("num_features").get<std::int64_t>(), bn_options(a, dt));
  });
  add_loss("MSELoss", [](const json& a) -> LossFn {
    const std::string r = a.value("reduction", "mean");
    const auto red = r == "sum" ? layers::Reduction::Sum : r == "none" ? layers::Reduction::None : layers::Reduction::Mean;
    return [red](const Tensor& x, const Tensor& t) { return layers::mse_loss(x, t, red); };
  });
  return true;
}();

}  // namespace
}  // namespace golden
