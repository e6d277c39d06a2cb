// read_maybe_gzip: the file read whole, then inflated with zlib's inflate (gzip wrapper) so
// that the end of every member, the bytes after it and the inflated size are all checked.
#include <tapegrad/data/gzip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include <zlib.h>

namespace tapegrad::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

std::string read_raw(const std::string& path, const std::string& who) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(who + ": cannot open '" + path + "': " + std::strerror(errno));
  std::string raw;
  char buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
    raw.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) throw std::runtime_error(who + ": cannot read '" + path + "': " + std::strerror(errno));
  return raw;
}

struct Inflater {
  z_stream zs{};
  bool open = false;
  ~Inflater() {
    if (open) inflateEnd(&zs);
  }
};

// keep false: the inflated bytes are only counted (check_gzip_trailer), never stored.
std::string gunzip(const std::string& raw, const std::string& path, std::uint64_t limit, const std::string& who,
                   const std::string& limit_name, bool keep = true) {
  const std::string at = who + ": '" + path + "': ";
  Inflater in;
  if (inflateInit2(&in.zs, 15 + 16) != Z_OK) throw std::bad_alloc();  // 15 + 16: gzip wrapper only
  in.open = true;
  z_stream& zs = in.zs;
  const auto* src = reinterpret_cast<const Bytef*>(raw.data());
  std::size_t fed = 0;  // bytes of raw handed to zlib so far
  std::string out;
  std::uint64_t total = 0;  // bytes inflated so far
  std::vector<char> buf(1 << 18);
  for (;;) {
    if (zs.avail_in == 0 && fed < raw.size()) {  // avail_in is 32-bit: feed at most 1 GiB at a time
      const std::size_t n = std::min<std::size_t>(raw.size() - fed, std::size_t{1} << 30);
      zs.next_in = const_cast<Bytef*>(src + fed);
      zs.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t got = buf.size() - zs.avail_out;
    if (total + got > limit)
      throw std::runtime_error(at + "the gzip data inflates to more than " + std::to_string(limit) + " bytes (" +
                               limit_name + " = " + std::to_string(limit) +
                               "; a gzip bomb, or a larger file: raise the limit to read it)");
    total += got;
    if (keep) out.append(buf.data(), got);
    const std::size_t consumed = fed - zs.avail_in;
    if (rc == Z_STREAM_END) {  // one member done; zlib has checked its CRC32 and length
      const std::size_t rest = raw.size() - consumed;
      if (rest == 0) break;
      if (rest >= 2 && src[consumed] == 0x1f && src[consumed + 1] == 0x8b) {  // another member
        inflateReset(&zs);
        continue;
      }
      if (std::all_of(raw.begin() + static_cast<std::ptrdiff_t>(consumed), raw.end(), [](char c) { return c == 0; }))
        break;  // zero padding (tape blocks), as gzip ignores it
      throw std::runtime_error(at + std::to_string(rest) + " bytes after the end of the gzip stream (at byte " +
                               std::to_string(consumed) + " of " + std::to_string(raw.size()) +
                               ") are not a gzip member: the file is corrupt or two files were joined");
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR)
      throw std::runtime_error(at + "corrupt gzip data near compressed byte " + std::to_string(consumed) + " of " +
                               std::to_string(raw.size()) + ": " + (zs.msg ? zs.msg : "invalid stream") +
                               " (a CRC32 or length mismatch means the data was damaged)");
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    // Z_OK or Z_BUF_ERROR: more input or more output space is needed
    if (zs.avail_in == 0 && fed == raw.size() && zs.avail_out != 0)
      throw std::runtime_error(at + "the gzip stream is cut short: the file ends after " + std::to_string(raw.size()) +
                               " bytes, before the end of the compressed data and its CRC32/length trailer " +
                               "(a truncated or incomplete download?)");
  }
  return out;
}

}  // namespace

std::string read_maybe_gzip(const std::string& path, std::uint64_t max_decompressed_bytes, const std::string& who,
                            const std::string& limit_name) {
  std::string raw = read_raw(path, who);
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;
  return gunzip(raw, path, max_decompressed_bytes, who, limit_name);
}

void check_gzip_trailer(const std::string& path, const std::string& who) {
  const std::string raw = read_raw(path, who);
  gunzip(raw, path, std::numeric_limits<std::uint64_t>::max(), who, "no limit", /*keep=*/false);
}

}  // namespace tapegrad::data
