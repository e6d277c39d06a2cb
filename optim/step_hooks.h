#pragma once
// Process-wide observation point of the optimizers: hooks called at the start of every
// step() with the parameters it will update (optim/finite_check.h and debug's mode audit
// use it). Hooks observe; they must not change tensors. No hook installed: one branch.
#include <cstdint>
#include <functional>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::optim::hooks {

/// Called at the start of every optimizer step() with the parameters it will update.
using StepHook = std::function<void(const std::vector<Tensor>& params)>;

/// Installs a step hook; returns an id for remove_step_hook.
std::uint64_t add_step_hook(StepHook hook);
/// Removes the step hook with this id (nothing when there is none).
void remove_step_hook(std::uint64_t id);
/// Invoked by every optimizer's step() (Optimizer::run_step_hooks).
void run_step_hooks(const std::vector<Tensor>& params);
/// Whether any step hook is installed (a step without hooks builds no parameter list).
bool any_step_hooks();

}  // namespace tapegrad::optim::hooks
