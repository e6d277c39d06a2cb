#pragma once
// CLI11 checks shared by the command-line programs (examples/ and the study CLIs): header-only,
// reached through the CMake target tapegrad_cli_checks.
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

namespace tapegrad_cli {

/// The check of an unsigned 64-bit option (a seed): CLI11 reads "-1" as 2^64 - 1 and any value
/// past 2^64 - 1 as 2^64 - 1; both are refused, "expected an integer >= 0, got -1" and
/// "expected an integer from 0 to 18446744073709551615, got 18446744073709551616".
inline const CLI::Validator& non_negative() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        if (s.find('-') != std::string::npos) return "expected an integer >= 0, got " + s;
        std::uint64_t value = 0;
        if (std::from_chars(s.data(), s.data() + s.size(), value).ec == std::errc::result_out_of_range)
          return "expected an integer from 0 to " + std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                 ", got " + s;
        return {};
      },
      "UINT");
  return v;
}

/// The check of a path option: an empty value is refused, "expected WHAT, got ''" (WHAT such
/// as "a checkpoint file"). Without it "--evaluate ''" read as no --evaluate and trained a model,
/// "--checkpoint ''" saved nothing.
inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) { return s.empty() ? "expected " + what + ", got ''" : std::string(); }, "");
}

}  // namespace tapegrad_cli
