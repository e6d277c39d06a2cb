#include <tapegrad/layers/sequential.h>

#include <optional>
#include <stdexcept>
#include <utility>
#include <typeinfo>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops/activation.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/hooks.h>

namespace tapegrad::layers {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) {
  for (auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  add_child(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

namespace {
// Whether children i and i + 1 are a ReLU and a Clamp with lo <= 0 <= hi (exactly those
// classes, not subclasses), which relu_clamp runs as one op with the same bits.
bool relu_then_clamp(const std::vector<ModulePtr>& layers, std::size_t i) {
  if (i + 1 >= layers.size() || typeid(*layers[i]) != typeid(ReLU) || typeid(*layers[i + 1]) != typeid(Clamp))
    return false;
  const auto& c = static_cast<const Clamp&>(*layers[i + 1]);
  return c.lo <= 0 && c.hi >= 0;
}
// Whether child i is a BatchNorm1d (exactly) followed by a ReLU: BatchNormBase::forward_relu.
bool batch_norm_then_relu(const std::vector<ModulePtr>& layers, std::size_t i) {
  return i + 1 < layers.size() && typeid(*layers[i]) == typeid(BatchNorm1d) && typeid(*layers[i + 1]) == typeid(ReLU);
}
}  // namespace

Tensor Sequential::forward(const Tensor& x) {
  ContainerForwardScope scope;
  Tensor h = x;
  try {
    // ReLU -> Clamp runs as one op (one tape node, one pass each way) unless something would
    // see the two calls apart: a forward hook, or anomaly mode's per-child recording sites.
    const bool fuse = !anomaly_mode_enabled() && !hooks::any_forward_hooks();
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (fuse && h.defined() && is_floating(h.dtype()) && batch_norm_then_relu(layers_, i)) {
        std::optional<std::pair<double, double>> clip;
        if (relu_then_clamp(layers_, i + 1)) {
          const auto& c = static_cast<const Clamp&>(*layers_[i + 2]);
          clip.emplace(c.lo, c.hi);
        }
        try {
          h = static_cast<BatchNorm1d&>(*layers_[i]).forward_relu(h, clip);
        } catch (const std::exception&) {
          // the same error as the layer run alone, named as call_child names it
          call_child(*layers_[i], std::to_string(i), h);
          throw;
        }
        i += clip ? 2 : 1;
      } else if (fuse && h.defined() && is_floating(h.dtype()) && relu_then_clamp(layers_, i)) {
        const auto& c = static_cast<const Clamp&>(*layers_[i + 1]);
        h = relu_clamp(h, c.lo, c.hi);
        ++i;
      } else if (anomaly_mode_enabled()) {  // the child's name joins the recording site: "Sequential/1/BatchNorm1d"
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
