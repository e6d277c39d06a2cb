#pragma once
// Whole-file input that may be gzip-compressed (read_csv's reader).
#include <cstdint>
#include <string>

namespace tapegrad::data {

/// The bytes of `path`: as they are, or inflated when the file starts with gzip's magic bytes
/// (1f 8b), whatever its name. Every member of a multi-member file (`cat a.gz b.gz`) is read;
/// each member's CRC32 and length trailer is checked; zero bytes after the last member are
/// ignored (as gzip does). `who` starts the messages, `limit_name` names the limit in them.
/// Throws std::runtime_error naming the file when it cannot be opened or read, when the
/// stream is cut short (no end of stream, no trailer), corrupt (bad deflate data, CRC32 or
/// length mismatch), followed by other data, or when it inflates to more than
/// `max_decompressed_bytes` (a gzip bomb; the limit does not apply to a plain file).
std::string read_maybe_gzip(const std::string& path, std::uint64_t max_decompressed_bytes, const std::string& who,
                            const std::string& limit_name);

/// Checks the gzip file `path` whole, as read_maybe_gzip does (every member's CRC32 and length,
/// nothing but more members or zero padding after the last one), inflating it without keeping
/// the output: for readers built on zlib's gzread, which ignores bytes after the last member.
/// Throws std::runtime_error naming the file (read_maybe_gzip's messages, starting with `who`).
void check_gzip_trailer(const std::string& path, const std::string& who);

}  // namespace tapegrad::data
