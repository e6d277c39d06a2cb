#include <tapegrad/layers/sequential.h>

#include <stdexcept>
#include <utility>

#include <tapegrad/core/autograd.h>

namespace tapegrad::layers {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) {
  for (auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  add_child(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  ContainerForwardScope scope;
  Tensor h = x;
  try {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (anomaly_mode_enabled()) {  // the child's name joins the recording site: "Sequential/1/BatchNorm1d"
        RecordSiteGuard site(std::to_string(i));
        h = call_child(*layers_[i], std::to_string(i), h);
      } else {
        h = call_child(*layers_[i], std::to_string(i), h);
      }
    }
  } catch (const std::exception& e) {
    scope.rethrow(e, x);
  }
  return h;
}

void Sequential::replace_child(const std::string& name, ModulePtr child) {
  Module::replace_child(name, child);  // throws for an unknown name or a null module
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (std::to_string(i) == name) layers_[i] = std::move(child);
}

ModulePtr Sequential::operator[](std::size_t i) const {
  if (i >= layers_.size())
    throw std::out_of_range("Sequential: index " + std::to_string(i) + " out of range for " +
                            std::to_string(layers_.size()) + " layers");
  return layers_[i];
}

}  // namespace tapegrad::layers
