#pragma once
// A test whose tool or data is missing fails rather than passes untested: setup.sh installs
// everything the suite needs. TAPEGRAD_ALLOW_SKIPS=1 (as for the golden vectors) turns the
// failure into a warning and an early return, for a machine without them on purpose.
#include <catch2/catch.hpp>

#include <cstdlib>

/// In a test case: FAILs with `what` (a stream expression naming what is missing and how to
/// install it), or with TAPEGRAD_ALLOW_SKIPS set warns and returns from the test case.
#define TAPEGRAD_MISSING(what)                                     \
  do {                                                             \
    if (std::getenv("TAPEGRAD_ALLOW_SKIPS")) {                     \
      WARN(what << "; skipped (TAPEGRAD_ALLOW_SKIPS)");            \
      return;                                                      \
    }                                                              \
    FAIL(what);                                                    \
  } while (0)
