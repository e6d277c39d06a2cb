#include "layers/hooks.h"

#include <atomic>
#include <mutex>
#include <utility>

namespace tapegrad::layers::hooks {
namespace {
struct Registry {
  std::mutex mu;
  std::uint64_t next = 1;
  std::vector<std::pair<std::uint64_t, ForwardHook>> forward;
  std::vector<std::pair<std::uint64_t, StepHook>> step;
};
Registry& reg() {
  static Registry r;
  return r;
}
std::atomic<int> g_forward_count{0};
}  // namespace

std::uint64_t add_forward_hook(ForwardHook h) {
  std::lock_guard<std::mutex> l(reg().mu);
  reg().forward.emplace_back(reg().next, std::move(h));
  ++g_forward_count;
  return reg().next++;
}

std::uint64_t add_step_hook(StepHook h) {
  std::lock_guard<std::mutex> l(reg().mu);
  reg().step.emplace_back(reg().next, std::move(h));
  return reg().next++;
}

void remove_hook(std::uint64_t id) {
  std::lock_guard<std::mutex> l(reg().mu);
  auto& f = reg().forward;
  for (auto it = f.begin(); it != f.end(); ++it)
    if (it->first == id) {
      f.erase(it);
      --g_forward_count;
      return;
    }
  auto& s = reg().step;
  for (auto it = s.begin(); it != s.end(); ++it)
    if (it->first == id) {
      s.erase(it);
      return;
    }
}

bool any_forward_hooks() { return g_forward_count.load(std::memory_order_relaxed) > 0; }

void run_forward_hooks(Module& m, const Tensor& in, const Tensor& out) {
  std::vector<ForwardHook> copy;
  {
    std::lock_guard<std::mutex> l(reg().mu);
    for (auto& [id, h] : reg().forward) copy.push_back(h);
  }
  for (auto& h : copy) h(m, in, out);
}

void run_step_hooks(const std::vector<Tensor>& params) {
  std::vector<StepHook> copy;
  {
    std::lock_guard<std::mutex> l(reg().mu);
    if (reg().step.empty()) return;
    for (auto& [id, h] : reg().step) copy.push_back(h);
  }
  for (auto& h : copy) h(params);
}

}  // namespace tapegrad::layers::hooks
