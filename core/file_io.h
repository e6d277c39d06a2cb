#pragma once
// Safe output files: atomic replacement, and checks that an output path can be written
// before any work is done (every CLI and every save goes through here).
//
// What a save writes over (the rule every tapegrad save follows):
//   - a new path, or an existing regular file: replaced atomically (temp file in the same
//     folder, fsync, rename, fsync of the folder). The old file's mode bits are kept (and
//     its owner, where permitted); a regular file that is not writable is refused.
//   - a symbolic link: followed deliberately. The write goes to the link's final target,
//     atomically in the target's folder, so the link stays a link. A dangling link creates
//     its target. A link in a sticky world-writable folder (such as /tmp) that belongs to
//     someone else is refused, like the kernel's fs.protected_symlinks does for open().
//   - anything else (directory, character or block device, FIFO, socket): refused with a
//     std::runtime_error naming the path and what is there; nothing is touched.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tapegrad {

/// The file a save to `path` writes: `path` itself, or the final target of the symbolic
/// link(s) at `path` (relative links resolve against the link's folder; at most 40 hops).
/// Throws std::runtime_error for a link loop, a refused link (see above), or an existing
/// object that is not a regular file (names its kind: "a directory", "a character
/// device", ...).
std::string resolve_output_file(const std::string& path);

/// Checks, without writing `path`, that a save to it can succeed: resolve_output_file
/// accepts it, its folder exists and is a folder, and a temp file can be created there
/// (created and removed at once). Throws std::runtime_error naming the path and the
/// reason. For CLIs: call on every output path before training.
void check_output_file(const std::string& path);

/// Creates `dir` (and its parents) if missing and checks that files can be created in it
/// (a temp file is created and removed). Throws std::runtime_error naming the folder and
/// the reason (not a folder, permission denied, read-only file system, ...).
void check_output_dir(const std::string& dir);

/// Replaces the file a save to `path` writes (see resolve_output_file) with `bytes`, or
/// leaves it untouched: writes a temp file in the target's folder, fsyncs it, gives it the
/// old file's mode, renames it over the target and fsyncs the folder. On any failure the
/// temp file is removed, the old file (if any) is intact, and std::runtime_error names the
/// path, the byte count written and the system error.
///
/// Temp files are named ".<file name>.tmp-<pid>-<n>" in the target's folder. A SIGINT,
/// SIGTERM or SIGHUP whose action is the default (ending the process) removes the temp
/// files of saves in progress before the process dies of it (the handler is put in place
/// by each save; a signal the program ignores stays ignored, and one the program handles
/// itself is passed to its handler while the save goes on). A temp file left by a writer that is gone (SIGKILL, a crash, a power
/// cut: its pid is no live process) is removed by the next save to the same target.
void atomic_write_file(const std::string& path, const std::uint8_t* bytes, std::size_t size);
/// Text overload (CSV, Markdown, scripts).
void atomic_write_file(const std::string& path, std::string_view text);

namespace testing {
/// Makes every following atomic_write_file fail after writing `bytes` bytes of its temp
/// file (a simulated full disk); std::nullopt turns it off. For tests of the failure path.
void fail_writes_after(std::optional<std::size_t> bytes);
/// Makes the next atomic_write_file raise signal `sig` in its own process once `bytes`
/// bytes of its temp file are written (a user's kill arriving mid-save), once;
/// std::nullopt turns it off. For tests of the signal cleanup (run it in a child process).
void raise_during_write(int sig, std::optional<std::size_t> bytes);
}  // namespace testing

}  // namespace tapegrad
