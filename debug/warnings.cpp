#include <tapegrad/debug/warnings.h>

#include <atomic>
#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace tapegrad::debug {
namespace {

std::atomic<std::int64_t> g_count{0};
std::mutex g_mu;
std::shared_ptr<const WarningHandler> g_handler;  // null: the default route

}  // namespace

std::shared_ptr<spdlog::logger> warning_logger() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("tapegrad", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("[tapegrad] [%l] %v");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return logger;
}

void set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_handler = handler ? std::make_shared<const WarningHandler>(std::move(handler)) : nullptr;
}

void emit_warning(const Warning& w, const WarningHandler& handler) {
  g_count.fetch_add(1, std::memory_order_relaxed);
  if (handler) {
    handler(w);
    return;
  }
  std::shared_ptr<const WarningHandler> h;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    h = g_handler;
  }
  if (h) (*h)(w);
  else warning_logger()->warn("{}", w.message);
}

std::int64_t warning_count() { return g_count.load(std::memory_order_relaxed); }
void reset_warning_count() { g_count.store(0, std::memory_order_relaxed); }

}  // namespace tapegrad::debug
