#pragma once
// Where the diagnostics' warnings go (debug::ModeAudit's findings, and the core mode checks'
// warnings of core/mode_checks.h once this library is linked), and how many there were.
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

#include <tapegrad/core/warnings.h>

namespace spdlog {
class logger;
}

namespace tapegrad::debug {

/// One warning (core/warnings.h): source "mode_audit" (kind: issue_name) or "mode_checks"
/// (kind: a mode check's name, e.g. "bn_train_no_grad").
using Warning = tapegrad::Warning;

/// Receives each warning (instead of the default stderr log).
using WarningHandler = std::function<void(const Warning&)>;

/// Sends every following warning (of every audit that has no handler of its own, and of
/// core's route, core/warnings.h) to `handler`, process-wide and thread-safe; an empty handler restores the default (the
/// "tapegrad" logger on stderr). The handler may run on any thread that trains or
/// evaluates, possibly under an audit's lock: it must not run the model itself.
void set_warning_handler(WarningHandler handler);

/// The spdlog logger of the default route: named "tapegrad", one stderr sink, pattern
/// "[tapegrad] [warning] <message>", created on first use (not registered with spdlog).
/// Add, remove or replace its sinks to route the warnings.
std::shared_ptr<spdlog::logger> warning_logger();

/// Sends `w` on its way: counted, then given to `handler` when set, else to the process-wide
/// route above.
/// (tapegrad::emit_warning(w), core/warnings.h, is the call without a handler: counted, then
/// this route once this library is linked.)
void emit_warning(const Warning& w, const WarningHandler& handler);

/// Warnings emitted in this process (audits' and core's) since it started or since
/// reset_warning_count(), and reset_warning_count() itself: core/warnings.h's.
using tapegrad::reset_warning_count;
using tapegrad::warning_count;

}  // namespace tapegrad::debug
