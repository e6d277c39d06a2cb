#include <tapegrad/optim/step_hooks.h>

#include <tapegrad/layers/hooks.h>

namespace tapegrad::optim::hooks {
namespace {
layers::hooks::HookList<StepHook>& step_hooks() {
  static layers::hooks::HookList<StepHook> list;
  return list;
}
}  // namespace

std::uint64_t add_step_hook(StepHook hook) { return step_hooks().add(std::move(hook)); }
void remove_step_hook(std::uint64_t id) { step_hooks().remove(id); }
void run_step_hooks(const std::vector<Tensor>& params) { step_hooks().run(params); }
bool any_step_hooks() { return !step_hooks().empty(); }

}  // namespace tapegrad::optim::hooks
