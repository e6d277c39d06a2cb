#include <tapegrad/layers/hooks.h>

namespace tapegrad::layers::hooks {
namespace {
HookList<ForwardHook>& forward_hooks() {
  static HookList<ForwardHook> list;
  return list;
}
}  // namespace

std::uint64_t add_forward_hook(ForwardHook hook) { return forward_hooks().add(std::move(hook)); }
void remove_hook(std::uint64_t id) { forward_hooks().remove(id); }
bool any_forward_hooks() { return !forward_hooks().empty(); }
void run_forward_hooks(Module& module, const Tensor& input, const Tensor& output) {
  forward_hooks().run(module, input, output);
}

}  // namespace tapegrad::layers::hooks
