#pragma once
// Process-wide observation points for diagnostics (the mode audit in debug/ uses them).
// Hooks observe; they must not change tensors. With no hook installed the cost is one
// branch per call. The optimizers' step hooks live in optim/step_hooks.h.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers {

class Module;

namespace hooks {

/// A thread-safe list of hooks, each with an id for removal (ids start at 1).
template <class Hook>
class HookList {
 public:
  /// Appends `hook`; returns its id for remove().
  std::uint64_t add(Hook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.emplace_back(next_, std::move(hook));
    count_.fetch_add(1, std::memory_order_relaxed);
    return next_++;
  }
  /// Removes the hook with this id; false when there is none.
  bool remove(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == id) {
        items_.erase(it);
        count_.fetch_sub(1, std::memory_order_relaxed);
        return true;
      }
    return false;
  }
  /// true when no hook is registered.
  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }
  /// Calls every hook with args, in the order added, on a copy of the list (so a hook may
  /// add or remove hooks).
  template <class... Args>
  void run(Args&&... args) const {
    if (empty()) return;
    std::vector<Hook> copy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& item : items_) copy.push_back(item.second);
    }
    for (auto& hook : copy) hook(args...);
  }

 private:
  mutable std::mutex mu_;
  std::uint64_t next_ = 1;
  std::vector<std::pair<std::uint64_t, Hook>> items_;
  std::atomic<int> count_{0};
};

/// Called after every Module::operator() with the module, its input and its output.
using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;

/// Installs a forward hook; returns an id for remove_hook.
std::uint64_t add_forward_hook(ForwardHook hook);
/// Removes the forward hook with this id (nothing when there is none).
void remove_hook(std::uint64_t id);

/// RAII: a forward hook installed for the guard's lifetime (add_forward_hook, then
/// remove_hook at scope exit).
class ScopedForwardHook {
 public:
  /// Installs `hook`.
  explicit ScopedForwardHook(ForwardHook hook) : id_(add_forward_hook(std::move(hook))) {}
  ~ScopedForwardHook() { remove_hook(id_); }
  ScopedForwardHook(const ScopedForwardHook&) = delete;
  ScopedForwardHook& operator=(const ScopedForwardHook&) = delete;

 private:
  std::uint64_t id_;
};

/// Invoked by Module::operator().
void run_forward_hooks(Module& module, const Tensor& input, const Tensor& output);
/// Whether any forward hook is registered (Module::operator() skips the call otherwise).
bool any_forward_hooks();

}  // namespace hooks
}  // namespace tapegrad::layers
