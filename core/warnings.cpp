#include <tapegrad/core/warnings.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>

namespace tapegrad {
namespace {

struct RouteState {
  std::mutex mu;
  std::shared_ptr<const WarningRoute> route;  // null: the default (stderr)
  std::map<std::string, std::int64_t> by_kind;
  std::atomic<std::int64_t> total{0};
};

RouteState& state() {
  static RouteState s;  // function-local: usable from other translation units' static initialisers
  return s;
}

}  // namespace

WarningRoute set_warning_route(WarningRoute route) {
  RouteState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  WarningRoute prev = s.route ? *s.route : WarningRoute();
  s.route = route ? std::make_shared<const WarningRoute>(std::move(route)) : nullptr;
  return prev;
}

void count_warning(const Warning& w) {
  RouteState& s = state();
  s.total.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.by_kind[w.kind];
}

void emit_warning(const Warning& w) {
  count_warning(w);
  RouteState& s = state();
  std::shared_ptr<const WarningRoute> r;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    r = s.route;
  }
  if (r) (*r)(w);
  else std::fprintf(stderr, "[tapegrad] [warning] %s\n", w.message.c_str());
}

std::int64_t warning_count() { return state().total.load(std::memory_order_relaxed); }

std::int64_t warning_count(const std::string& kind) {
  RouteState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto it = s.by_kind.find(kind);
  return it == s.by_kind.end() ? 0 : it->second;
}

void reset_warning_count() {
  RouteState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.total.store(0, std::memory_order_relaxed);
  s.by_kind.clear();
}

}  // namespace tapegrad
