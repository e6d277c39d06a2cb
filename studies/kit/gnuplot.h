#pragma once
// gnuplot for the study CLIs (bn_experiments, norm_study), with no shell in between: the
// program is started with posix_spawnp and a fixed argument vector (gnuplot <script>...),
// optionally in a given folder, its output redirected by file actions, so no path or user
// string is ever parsed by /bin/sh. Strings written into a gnuplot script go through
// gnuplot_quote().
#include <sys/types.h>

#include <string>
#include <vector>

namespace report_kit {

/// `text` as a single-quoted gnuplot string: 'it''s' (a quote is doubled; gnuplot does no
/// backslash, backquote or macro substitution inside single quotes). Throws
/// std::invalid_argument for a newline, carriage return or NUL, which a gnuplot string
/// cannot hold.
std::string gnuplot_quote(const std::string& text);

/// Whether `gnuplot` with the pngcairo terminal runs on this machine (checked once per
/// process, without a shell).
bool gnuplot_available();

/// Starts `gnuplot script...` in the folder `cwd` (empty: the current folder), stdin and
/// stdout on /dev/null, stderr appended to `log` (a path opened by the child; empty:
/// /dev/null). A script name starting with '-' is passed as "./name" (not an option).
/// Returns the child's pid, or -1 when it cannot be started.
pid_t spawn_gnuplot(const std::string& cwd, const std::vector<std::string>& scripts, const std::string& log);

/// Waits for `pid` (retrying on EINTR); true when it exited with status 0.
bool wait_ok(pid_t pid);

/// spawn_gnuplot in the current folder, then wait_ok: 0 on success, -1 otherwise.
int run_gnuplot(const std::vector<std::string>& scripts, const std::string& log_path);

/// Writes `csv` to dir/results.csv and `summary` to dir/summary.md (creating dir/plots), then
/// whether figures can be drawn: false, with one warning, when gnuplot is missing.
bool write_tables(const std::string& dir, const std::string& csv, const std::string& summary);

/// Writes `script` to `script_path`, removes a stale `png`, runs gnuplot on it (stderr to
/// `log_path`) and returns {png} when the figure was written; otherwise warns (the CSV is
/// unaffected) and returns {}.
std::vector<std::string> render_figure(const std::string& script_path, const std::string& script,
                                       const std::string& png, const std::string& log_path);

/// Writes `text` to `path` atomically (tapegrad::atomic_write_file: a regular file or a new
/// path, never a device or a directory). Throws naming the path.
void write_file(const std::string& path, const std::string& text);

}  // namespace report_kit
