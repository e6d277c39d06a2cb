#include <tapegrad/debug/warnings.h>

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace tapegrad::debug {
namespace {

std::mutex g_mu;
std::shared_ptr<const WarningHandler> g_handler;  // null: the default route

// The route of this library: the handler when set, else the "tapegrad" logger.
void route(const Warning& w) {
  std::shared_ptr<const WarningHandler> h;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    h = g_handler;
  }
  if (h) (*h)(w);
  else warning_logger()->warn("{}", w.message);
}

// core's warnings (core/warnings.h) take this library's route once it is linked.
const bool g_route_installed = (tapegrad::set_warning_route(route), true);

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
  (void)g_route_installed;
  std::lock_guard<std::mutex> lock(g_mu);
  g_handler = handler ? std::make_shared<const WarningHandler>(std::move(handler)) : nullptr;
}

void emit_warning(const Warning& w, const WarningHandler& handler) {
  tapegrad::count_warning(w);
  if (handler) handler(w);
  else route(w);
}


}  // namespace tapegrad::debug
