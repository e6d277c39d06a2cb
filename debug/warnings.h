#pragma once
// Where the diagnostics' warnings go (debug::ModeAudit's findings), and how many there were.
//
// Default: one line per warning on stderr, through the spdlog logger "tapegrad"
// (warning_logger(); not spdlog's default logger, so the program's own stdout output stays
// clean). Route them elsewhere with set_warning_handler (a callback: a test, a GUI, a
// metrics counter) or by changing the logger's sinks (a file, syslog). Counting works
// whatever the route: warning_count().
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace tapegrad::debug {

/// One warning.
struct Warning {
  std::string source;   ///< what raised it: "mode_audit"
  std::string kind;     ///< e.g. "bn_train_no_backward" (see issue_name)
  std::string message;  ///< the full text, as logged
};

/// Receives each warning (instead of the default stderr log).
using WarningHandler = std::function<void(const Warning&)>;

/// Sends every following warning (of every audit that has no handler of its own) to
/// `handler`, process-wide and thread-safe; an empty handler restores the default (the
/// "tapegrad" logger on stderr). The handler may run on any thread that trains or
/// evaluates, possibly under an audit's lock: it must not run the model itself.
void set_warning_handler(WarningHandler handler);

/// The spdlog logger of the default route: named "tapegrad", one stderr sink, pattern
/// "[tapegrad] [warning] <message>", created on first use (not registered with spdlog).
/// Add, remove or replace its sinks to route the warnings.
std::shared_ptr<spdlog::logger> warning_logger();

/// Sends `w` on its way: counted, then given to `handler` when set, else to the process-wide
/// route above.
void emit_warning(const Warning& w, const WarningHandler& handler = {});

/// Warnings emitted in this process since it started or since reset_warning_count().
std::int64_t warning_count();
/// Sets warning_count() back to 0.
void reset_warning_count();

}  // namespace tapegrad::debug
