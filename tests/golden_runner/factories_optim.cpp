// Factories for the optimizers: SGD, Adam, AdamW, RMSprop from PyTorch constructor args.
#include <memory>

#include "golden_runner/support.h"
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/rmsprop.h>
#include <tapegrad/optim/sgd.h>

namespace golden {
namespace {

using namespace tapegrad;

template <class Opt>
OptimizerHandle handle(std::shared_ptr<Opt> opt) {
  return OptimizerHandle{opt, [opt] { opt->step(); }};
}

template <class Options>
Options adam_options(const json& a, Options o) {
  o.lr = a.at("lr");
  if (a.contains("betas")) o.betas = {a["betas"].at(0).get<double>(), a["betas"].at(1).get<double>()};
  o.eps = a.value("eps", o.eps);
  o.weight_decay = a.value("weight_decay", o.weight_decay);
  o.amsgrad = a.value("amsgrad", false);
  o.maximize = a.value("maximize", false);
  return o;
}

const bool registered = [] {
  add_optimizer("SGD", [](const json& a, const std::vector<Tensor>& params) {
    optim::SGDOptions o;
    o.lr = a.at("lr");
    o.momentum = a.value("momentum", 0.0);
    o.dampening = a.value("dampening", 0.0);
    o.nesterov = a.value("nesterov", false);
    o.weight_decay = a.value("weight_decay", 0.0);
    o.maximize = a.value("maximize", false);
    return handle(std::make_shared<optim::SGD>(params, o));
  });
  add_optimizer("Adam", [](const json& a, const std::vector<Tensor>& params) {
    return handle(std::make_shared<optim::Adam>(params, adam_options(a, optim::AdamOptions{})));
  });
  add_optimizer("AdamW", [](const json& a, const std::vector<Tensor>& params) {
    return handle(std::make_shared<optim::AdamW>(params, adam_options(a, optim::AdamWOptions{})));
  });
  add_optimizer("RMSprop", [](const json& a, const std::vector<Tensor>& params) {
    optim::RMSpropOptions o;
    o.lr = a.at("lr");
    o.alpha = a.value("alpha", o.alpha);
    o.eps = a.value("eps", o.eps);
    o.weight_decay = a.value("weight_decay", 0.0);
    o.momentum = a.value("momentum", 0.0);
    o.centered = a.value("centered", false);
    o.maximize = a.value("maximize", false);
    return handle(std::make_shared<optim::RMSprop>(params, o));
  });
  return true;
}();

}  // namespace
}  // namespace golden
