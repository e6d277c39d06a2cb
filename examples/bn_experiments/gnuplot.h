#pragma once
// Running gnuplot without a shell. No path or other user string is ever pasted into a
// command line: gnuplot is started with posix_spawnp and an argv, in the output folder,
// and its scripts name every file relative to that folder.
#include <sys/types.h>

#include <string>
#include <vector>

namespace bnexp {

/// `s` as a gnuplot single-quoted string: 'it''s' (a quote is doubled; gnuplot does no
/// backslash, backquote or macro substitution inside single quotes). Throws
/// std::invalid_argument for a newline, carriage return or NUL, which a gnuplot string
/// cannot hold.
std::string gnuplot_quote(const std::string& s);

/// Starts `gnuplot script...` in the folder `cwd`, stdin and stdout on /dev/null, stderr
/// appended to `log` (a path: opened by the child, no shell). Returns the child's pid, or
/// -1 when it cannot be started.
pid_t spawn_gnuplot(const std::string& cwd, const std::vector<std::string>& scripts, const std::string& log);

/// Waits for `pid`; true when it exited with status 0.
bool wait_ok(pid_t pid);

/// Whether `gnuplot` with the pngcairo terminal runs on this machine (checked once per
/// process, without a shell).
bool gnuplot_available();

}  // namespace bnexp
