#pragma once
// Process-wide observation points for diagnostics (the mode audit in debug/ uses them).
// Hooks observe; they must not change tensors. With no hook installed the cost is one
// branch per call.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace tapegrad::layers {

class Module;

namespace hooks {

/// Called after every Module::operator() with the module, its input and its output.
using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;
/// Called at the start of every optimizer step() with the parameters it will update.
using StepHook = std::function<void(const std::vector<Tensor>& params)>;

/// Installs a hook; returns an id for removal.
std::uint64_t add_forward_hook(ForwardHook hook);
std::uint64_t add_step_hook(StepHook hook);
void remove_hook(std::uint64_t id);

/// Invoked by Module::operator() and by optimizers.
void run_forward_hooks(Module& module, const Tensor& input, const Tensor& output);
void run_step_hooks(const std::vector<Tensor>& params);
bool any_forward_hooks();

}  // namespace hooks
}  // namespace tapegrad::layers
