#pragma once
// What a runner collected, and how both runners report it to Catch2.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace golden {

struct Outcome {
  std::vector<std::string> failures;
  std::vector<std::string> skips;
};

/// Skips are printed by name; every failure fails the test. Every type in the shared vectors
/// is implemented, so a skip also fails (a lost factory) unless TAPEGRAD_ALLOW_SKIPS is set,
/// e.g. to replay a vector set with types tapegrad lacks.
inline void report(const Outcome& o) {
  for (auto& s : o.skips) WARN(s);
  for (auto& f : o.failures) FAIL_CHECK(f);
  CHECK(o.failures.empty());
  if (!std::getenv("TAPEGRAD_ALLOW_SKIPS")) CHECK(o.skips.empty());
}

}  // namespace golden
