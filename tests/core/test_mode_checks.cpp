// core/mode_checks.h and core/warnings.h: the setting and its environment variable, the
// per-kind first warning and counting, Throw mode, the pause and the scopes, the route.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/warnings.h>
#include "mode_checks_support.h"

using namespace tapegrad;

namespace {

using Capture = ModeChecksCapture;

// Sets TAPEGRAD_MODE_CHECKS for one test (unset when `value` is null); restores it after.
struct EnvVar {
  std::string old;
  bool had;
  explicit EnvVar(const char* value) {
    const char* o = std::getenv("TAPEGRAD_MODE_CHECKS");
    had = o != nullptr;
    if (had) old = o;
    if (value) ::setenv("TAPEGRAD_MODE_CHECKS", value, 1);
    else ::unsetenv("TAPEGRAD_MODE_CHECKS");
  }
  ~EnvVar() {
    if (had) ::setenv("TAPEGRAD_MODE_CHECKS", old.c_str(), 1);
    else ::unsetenv("TAPEGRAD_MODE_CHECKS");
  }
};

}  // namespace

TEST_CASE("parse_mode_checks accepts the documented values and names a bad one", "[mode_checks][errors]") {
  CHECK(parse_mode_checks("0") == ModeChecks::Off);
  CHECK(parse_mode_checks("off") == ModeChecks::Off);
  CHECK(parse_mode_checks("1") == ModeChecks::Warn);
  CHECK(parse_mode_checks("WARN") == ModeChecks::Warn);
  CHECK(parse_mode_checks("throw") == ModeChecks::Throw);
  CHECK_THROWS_WITH(parse_mode_checks("yes"), "mode checks: expected 0, off, 1, warn or throw, got 'yes'");
}

TEST_CASE("TAPEGRAD_MODE_CHECKS sets the initial value and a bad value names the variable", "[mode_checks][errors]") {
  {
    EnvVar e(nullptr);
    CHECK(mode_checks_from_environment() == ModeChecks::Warn);
  }
  {
    EnvVar e("");
    CHECK(mode_checks_from_environment() == ModeChecks::Warn);
  }
  {
    EnvVar e("0");
    CHECK(mode_checks_from_environment() == ModeChecks::Off);
  }
  {
    EnvVar e("throw");
    CHECK(mode_checks_from_environment() == ModeChecks::Throw);
  }
  {
    EnvVar e("always");
    CHECK_THROWS_AS(mode_checks_from_environment(), std::invalid_argument);
    CHECK_THROWS_WITH(mode_checks_from_environment(),
                      "TAPEGRAD_MODE_CHECKS: expected 0, off, 1, warn or throw, got 'always' (unset it for the "
                      "default, warn)");
  }
}

TEST_CASE("report_mode_issue warns once per kind and counts every occurrence", "[mode_checks]") {
  Capture c(ModeChecks::Warn);
  const std::int64_t routed = warning_count("kind_a");
  report_mode_issue("kind_a", "first text");
  report_mode_issue("kind_a", "second text");
  report_mode_issue("kind_b", "other text");
  REQUIRE(c.got.size() == 2);
  CHECK(c.got[0].source == "mode_checks");
  CHECK(c.got[0].kind == "kind_a");
  CHECK(c.got[0].message == "first text");
  CHECK(c.got[1].kind == "kind_b");
  CHECK(mode_issue_count("kind_a") == 2);
  CHECK(mode_issue_count("kind_b") == 1);
  CHECK(warning_count("kind_a") == routed + 1);
  const auto before = mode_issue_counts();
  report_mode_issue("kind_b", "again");
  const auto since = mode_issue_counts_since(before);
  REQUIRE(since.size() == 1);
  CHECK(since.at("kind_b") == 1);
}

TEST_CASE("report_mode_issue throws logic_error with the text in Throw mode", "[mode_checks][errors]") {
  Capture c(ModeChecks::Throw);
  CHECK_THROWS_AS(report_mode_issue("kind_a", "the text"), std::logic_error);
  CHECK_THROWS_WITH(report_mode_issue("kind_a", "the text"), "the text");
  CHECK(c.got.empty());
  CHECK(mode_issue_count("kind_a") == 2);
}

TEST_CASE("ModeChecksPause and Off silence the checks and the option scopes restore", "[mode_checks]") {
  Capture c(ModeChecks::Throw);
  {
    ModeChecksPause pause;
    CHECK(effective_mode_checks() == ModeChecks::Off);
    CHECK_NOTHROW(report_mode_issue("kind_a", "x"));
    {
      const ModeChecksOption on(true);  // on again inside the pause: Warn
      CHECK(effective_mode_checks() == ModeChecks::Warn);
    }
    CHECK(effective_mode_checks() == ModeChecks::Off);
  }
  CHECK(effective_mode_checks() == ModeChecks::Throw);
  {
    const ModeChecksOption unset(std::nullopt);
    CHECK(effective_mode_checks() == ModeChecks::Throw);
    const ModeChecksOption off(false);
    CHECK(effective_mode_checks() == ModeChecks::Off);
  }
  set_mode_checks(ModeChecks::Off);
  CHECK_NOTHROW(report_mode_issue("kind_a", "x"));
  CHECK(mode_issue_count("kind_a") == 0);
  CHECK(c.got.empty());
}

TEST_CASE("emit_warning counts by kind and goes to the route", "[mode_checks]") {
  std::vector<Warning> got;
  WarningRoute prev = set_warning_route([&](const Warning& w) { got.push_back(w); });
  const std::int64_t total = warning_count(), kind = warning_count("route_test");
  emit_warning(Warning{"test", "route_test", "hello"});
  set_warning_route(prev);
  REQUIRE(got.size() == 1);
  CHECK(got[0].message == "hello");
  CHECK(warning_count() == total + 1);
  CHECK(warning_count("route_test") == kind + 1);
}
