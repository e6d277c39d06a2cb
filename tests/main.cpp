#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include <tapegrad/core/mode_checks.h>

namespace {
// Under TAPEGRAD_MODE_CHECKS=throw (set on every ctest entry), a bn_train_no_backward error
// is only raised at the next tracked forward, which may belong to another test case, or
// never. At the end of each test case a pending one names the test case that caused it and
// fails the run (core/mode_checks.h).
struct PendingModeIssueListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    try {
      tapegrad::throw_pending_mode_issue();
    } catch (const std::exception& e) {
      std::fflush(nullptr);
      std::fprintf(stderr, "test case '%s' left a mode issue pending: %s\n", stats.testInfo.name.c_str(), e.what());
      std::_Exit(tapegrad::kPendingExitStatus);
    }
  }
};
}  // namespace

CATCH_REGISTER_LISTENER(PendingModeIssueListener)
