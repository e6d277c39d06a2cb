#pragma once
// CLI11 checks shared by the command-line programs (examples/ and the study CLIs): header-only,
// reached through the CMake target tapegrad_cli_checks.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <limits>
#include <optional>
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
      "");  // the type is already "UINT" in --help
  return v;
}

/// The check of a path option: an empty value is refused, "expected WHAT, got ''" (WHAT such
/// as "a checkpoint file"). Without it "--evaluate ''" read as no --evaluate and trained a model,
/// "--checkpoint ''" saved nothing.
inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) { return s.empty() ? "expected " + what + ", got ''" : std::string(); }, "");
}

/// Parses the command line into `app`. std::nullopt: parsed, go on. Otherwise the status to
/// exit with: 0 after --help; 2 after a refused option or argument, printed to stderr as
/// "<program>: <CLI11's message>" (CLI11's own codes differ by error: 105 for a check, 106
/// for a conversion, 109 for an extra argument; these programs exit 2 for every refusal).
inline std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::cerr << program << ": " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace tapegrad_cli
