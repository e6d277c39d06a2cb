// Test-case names with every character Catch2's filter or CMake's lists give a meaning to:
// each must become a ctest entry of its own that runs exactly this one case
// (cmake/tapegrad_catch_add_tests.cmake; catch_registration checks the count).
#include <catch2/catch.hpp>

#include <string>

namespace {

// Run by ctest, a process has a test filter and must run one test case only: a filter that
// selected several cases fails the second one. Run whole (no filter), every case runs.
void check_runs_alone(const std::string& expected_name) {
  static int cases_run = 0;
  ++cases_run;
  CHECK(Catch::getResultCapture().getCurrentTestName() == expected_name);
  if (Catch::getCurrentContext().getConfig()->hasTestFilters()) {
    CHECK(cases_run == 1);
  }
}

}  // namespace

#define TAPEGRAD_NAME_CASE(name) \
  TEST_CASE(name, "[ctest]") { check_runs_alone(name); }

TAPEGRAD_NAME_CASE("a semicolon; then a second part; and a third")
TAPEGRAD_NAME_CASE("a comma, then more")
TAPEGRAD_NAME_CASE("a comma,without a blank")
TAPEGRAD_NAME_CASE("a [bracketed] word inside")
TAPEGRAD_NAME_CASE("[bracketed] first")
TAPEGRAD_NAME_CASE("a lone ] closing bracket")
TAPEGRAD_NAME_CASE("a star * in the middle")
TAPEGRAD_NAME_CASE("*a star first")
TAPEGRAD_NAME_CASE("a star last*")
TAPEGRAD_NAME_CASE("~a tilde first")
TAPEGRAD_NAME_CASE("~ a tilde then a blank")
TAPEGRAD_NAME_CASE("a backslash \\ and an escaped \\, comma")
TAPEGRAD_NAME_CASE("a backslash last\\")
TAPEGRAD_NAME_CASE("double \"quotes\" inside, and a comma")
TAPEGRAD_NAME_CASE("\"quoted whole\"")
TAPEGRAD_NAME_CASE(" a leading blank")
TAPEGRAD_NAME_CASE("a trailing blank ")
TAPEGRAD_NAME_CASE("exclude:a name that reads like an exclusion")
TAPEGRAD_NAME_CASE("#a hash first")
TAPEGRAD_NAME_CASE("-a dash first")
TAPEGRAD_NAME_CASE("a bracket argument's end ]==] inside")
TAPEGRAD_NAME_CASE("[.] a hidden tag written in the name")
