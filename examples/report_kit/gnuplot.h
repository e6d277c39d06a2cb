#pragma once
// gnuplot for the study CLIs, with no shell in between: the program is started with
// posix_spawnp and a fixed argument vector (gnuplot <script>), its output redirected by
// file actions, so no path or user string is ever parsed by /bin/sh. Paths written into a
// gnuplot script go through gnuplot_quote().
#include <string>
#include <vector>

namespace report_kit {

/// `text` as a single-quoted gnuplot string: '...' with every ' doubled (gnuplot's only
/// escape inside single quotes). Throws std::invalid_argument for a newline or NUL, which
/// a gnuplot string cannot hold.
std::string gnuplot_quote(const std::string& text);

/// Whether `gnuplot` is on PATH and has the pngcairo terminal (checked once per process).
bool gnuplot_available();

/// Runs `gnuplot script_1 script_2 ...` (one process, scripts in order), stdout to
/// /dev/null and stderr to `log_path`; waits for it. Returns the exit status (0 = success),
/// -1 when it cannot be started.
int run_gnuplot(const std::vector<std::string>& scripts, const std::string& log_path);

/// Writes `text` to `path` (binary, replacing it). Throws std::runtime_error naming the path.
void write_file(const std::string& path, const std::string& text);

}  // namespace report_kit
