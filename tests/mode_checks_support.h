#pragma once
// The mode-check tests' fixture: captures the routed warnings and sets the mode for one test,
// restoring the route, the mode and the issue counts afterwards.
#include <vector>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/warnings.h>

struct ModeChecksCapture {
  std::vector<tapegrad::Warning> got;
  tapegrad::WarningRoute prev;
  tapegrad::ModeChecks prev_mode;
  explicit ModeChecksCapture(tapegrad::ModeChecks mode) : prev_mode(tapegrad::mode_checks()) {
    prev = tapegrad::set_warning_route([this](const tapegrad::Warning& w) { got.push_back(w); });
    tapegrad::set_mode_checks(mode);
    tapegrad::reset_mode_issues();
  }
  ~ModeChecksCapture() {
    tapegrad::set_warning_route(prev);
    tapegrad::set_mode_checks(prev_mode);
    tapegrad::reset_mode_issues();
  }
  ModeChecksCapture(const ModeChecksCapture&) = delete;
  ModeChecksCapture& operator=(const ModeChecksCapture&) = delete;
};
