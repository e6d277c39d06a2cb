#pragma once
// gnuplot with no shell in between: the program is started with posix_spawnp and a fixed
// argument vector (gnuplot <script>...), optionally in a given folder, its output redirected
// by file actions, so no path or user string is ever parsed by /bin/sh. Strings written into
// a gnuplot script go through gnuplot_quote() (file names) or gnuplot_text() (titles, keys,
// axis labels: text shown in the figure). Used by LearningCurves and the study CLIs.
#include <sys/types.h>

#include <string>
#include <vector>

namespace tapegrad::train {

/// `text` as a single-quoted gnuplot string: 'it''s' (a quote is doubled; gnuplot does no
/// backslash, backquote or macro substitution inside single quotes). Throws
/// std::invalid_argument for a newline, carriage return or NUL, which a gnuplot string
/// cannot hold.
std::string gnuplot_quote(const std::string& text);

/// `text` as a gnuplot string expression that a terminal in enhanced text mode (pngcairo's
/// default) shows exactly as written: single-quoted with quotes doubled, and each of
/// \ ^ _ @ & ~ { } (enhanced-text markup) preceded by a backslash, so the key "val_loss" is
/// 'val\_loss' and shows val_loss, not "val" with a subscript "l". A newline becomes a line
/// break ('a'."\n".'b'). For titles, keys and axis labels; file names take gnuplot_quote().
/// Throws std::invalid_argument for a carriage return or NUL.
std::string gnuplot_text(const std::string& text);

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

}  // namespace tapegrad::train
