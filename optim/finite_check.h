#pragma once
// Optional check for non-finite parameters and gradients before an optimizer step.
//
// A NaN or Inf that reaches a parameter spreads to every later output and cannot be
// undone. PyTorch has no built-in check (torch.nn.utils.clip_grad_norm_ has an opt-in
// error_if_nonfinite); this is the same idea as a standalone check and as a guard that
// runs it at the start of every optimizer step(), before anything is written.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers {
class Module;
}

namespace tapegrad::optim {

/// Throws std::runtime_error when a parameter value (or, with check_grads, a defined
/// gradient) is NaN or ±Inf. The message names the parameter ("0.weight" when named,
/// otherwise "parameter <i>"), its shape, whether the value or the gradient is bad, the
/// flat index and value of the first bad element and how many elements are bad.
/// Undefined gradients are skipped; int64 tensors are ignored.
void check_finite(const std::vector<std::pair<std::string, Tensor>>& named_params, bool check_grads = true);
/// As above with parameters named "parameter <i>" by position.
void check_finite(const std::vector<Tensor>& params, bool check_grads = true);

/// RAII: while alive, every optimizer step() (through optim/step_hooks.h's step hook, which
/// runs before the update) calls check_finite on the parameters it is about to update,
/// so a step with a NaN gradient throws and leaves every parameter unchanged.
/// With `names`, parameters are reported by their dotted names in that module
/// (which must outlive the guard).
class FiniteCheckGuard {
 public:
  /// Installs the check (removed by the destructor). `check_grads` false checks the
  /// parameters' values only, not their gradients.
  explicit FiniteCheckGuard(const layers::Module* names = nullptr, bool check_grads = true);
  ~FiniteCheckGuard();
  FiniteCheckGuard(const FiniteCheckGuard&) = delete;
  FiniteCheckGuard& operator=(const FiniteCheckGuard&) = delete;

 private:
  std::uint64_t hook_id_;
};

}  // namespace tapegrad::optim
