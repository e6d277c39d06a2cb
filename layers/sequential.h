#pragma once
#include <initializer_list>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Applies its children in order; children are named "0", "1", ... so state_dict keys
/// are "0.weight", "1.running_mean", as in PyTorch. An error inside a child names it (see
/// call_child): "in module '1' (BatchNorm1d): ... (model input: [10])". Runs each child as
/// it is, whatever its type; layers::fuse_modules (layers/fuse_modules.h) rewrites the
/// children into fused modules for speed.
class Sequential : public Module {
 public:
  Sequential() = default;
  /// Children "0", "1", ... in the order given: Sequential({linear, bn, relu}). Throws
  /// std::invalid_argument for a null module.
  Sequential(std::initializer_list<ModulePtr> modules);
  /// Appends a module as child "<size()>".
  void push_back(ModulePtr m);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  /// Number of children.
  std::size_t size() const { return layers_.size(); }
  /// Replaces child "<i>" (also in the forward order).
  void replace_child(const std::string& name, ModulePtr child) override;
  /// The i-th child; throws std::out_of_range.
  ModulePtr operator[](std::size_t i) const;

 private:
  std::vector<ModulePtr> layers_;
};

}  // namespace tapegrad::layers
