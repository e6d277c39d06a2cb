#include "layers/sequential.h"

#include <stdexcept>

namespace tapegrad::layers {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) {
  for (auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  add_child(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : layers_) h = (*m)(h);
  return h;
}

ModulePtr Sequential::operator[](std::size_t i) const {
  if (i >= layers_.size())
    throw std::out_of_range("Sequential: index " + std::to_string(i) + " out of range for " +
                            std::to_string(layers_.size()) + " layers");
  return layers_[i];
}

}  // namespace tapegrad::layers
