#pragma once
// The process-wide warning route of every library folder (core and layers raise warnings
// too, e.g. the mode checks of core/mode_checks.h), and how many there were.
//
// Default: one line per warning on stderr, "[tapegrad] [warning] <message>". debug/
// (debug/warnings.h) replaces the route with its spdlog logger and set_warning_handler, so
// a program that links it gets these warnings there. Counting works whatever the route.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace tapegrad {

/// One warning.
struct Warning {
  std::string source;   ///< what raised it: "mode_checks", "mode_audit", ...
  std::string kind;     ///< e.g. "bn_train_no_grad"
  std::string message;  ///< the full text, as printed
};

/// Receives each warning.
using WarningRoute = std::function<void(const Warning&)>;

/// Sends every following warning to `route` (process-wide, thread-safe) and returns the
/// previous route (empty: the default); an empty route restores the default (one line on
/// stderr). The route may run on any thread that trains or evaluates: it must not run the
/// model itself.
WarningRoute set_warning_route(WarningRoute route);

/// Counts `w` (in total and under w.kind), then gives it to the route.
void emit_warning(const Warning& w);
/// Counts `w` as emit_warning does without routing it (for a caller that delivers it to a
/// handler of its own).
void count_warning(const Warning& w);

/// Warnings emitted since the process started or since reset_warning_count().
std::int64_t warning_count();
/// Warnings of `kind` emitted since then.
std::int64_t warning_count(const std::string& kind);
/// Sets every warning count back to 0.
void reset_warning_count();

}  // namespace tapegrad
