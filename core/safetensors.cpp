#include "core/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tapegrad {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; this reader copies bytes as they are");

namespace {

using json = nlohmann::json;

const char* dtype_tag(Dtype d) {
  switch (d) {
    case Dtype::Float32: return "F32";
    case Dtype::Float64: return "F64";
    case Dtype::Int64: return "I64";
  }
  return "?";
}

std::optional<Dtype> dtype_from_tag(const std::string& s) {
  if (s == "F32") return Dtype::Float32;
  if (s == "F64") return Dtype::Float64;
  if (s == "I64") return Dtype::Int64;
  return std::nullopt;
}

[[noreturn]] void fail(const std::string& what, std::uint64_t offset) {
  throw std::runtime_error("safetensors: " + what + " (at byte offset " + std::to_string(offset) + ")");
}

// Non-negative integer from a JSON number; nullopt for anything else.
std::optional<std::uint64_t> as_u64(const json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(j.get<std::int64_t>());
  return std::nullopt;
}

struct Entry {
  std::string name;
  Dtype dtype;
  Shape shape;
  std::uint64_t begin, end;
};

}  // namespace

const Tensor* SafetensorsContent::find(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

// ---- writer ----------------------------------------------------------------------------

std::vector<std::uint8_t> serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    if (name.empty()) throw std::invalid_argument("save_safetensors: empty tensor name");
    if (name == "__metadata__") throw std::invalid_argument("save_safetensors: '__metadata__' is a reserved name");
    if (!seen.insert(name).second) throw std::invalid_argument("save_safetensors: duplicate tensor name '" + name + "'");
    if (!t.defined()) throw std::invalid_argument("save_safetensors: tensor '" + name + "' is undefined");
    header[name] = {{"dtype", dtype_tag(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("save_safetensors: a name or metadata string is not valid UTF-8: ") +
                                e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::vector<std::uint8_t> out(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::uint8_t* p = out.data() + 8 + text.size();
  for (auto& [name, t] : tensors) {
    std::memcpy(p, t.raw_data(), t.nbytes());
    p += t.nbytes();
  }
  return out;
}

// ---- reader ----------------------------------------------------------------------------

SafetensorsContent parse_safetensors(const std::uint8_t* data, std::size_t size) {
  if (size < 8) fail("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length", 0);
  std::uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > kSafetensorsMaxHeader)
    fail("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kSafetensorsMaxHeader), 0);
  if (n > size - 8)
    fail("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
             " bytes, header would end at " + std::to_string(8 + n) + ")",
         0);
  if (n == 0 || data[8] != '{') fail("header does not start with '{'", 8);
  const char* text = reinterpret_cast<const char*>(data + 8);
  const std::string_view header_text(text, n);

  // Parse, rejecting duplicate names and nesting deeper than the format uses.
  json header;
  std::set<std::string> names;
  std::string duplicate;
  try {
    header = json::parse(
        text, text + n,
        [&](int depth, json::parse_event_t ev, json& parsed) {
          if (depth > 3) throw std::length_error("nesting");
          if (ev == json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second &&
              duplicate.empty())
            duplicate = parsed.get<std::string>();
          return true;
        },
        true, false);
  } catch (const json::parse_error& e) {
    fail(std::string("header is not valid JSON: ") + e.what(), 8 + (e.byte > 0 ? e.byte - 1 : 0));
  } catch (const std::length_error&) {
    fail("header JSON is nested deeper than the format allows", 8);
  } catch (const json::exception& e) {  // e.g. out_of_range 406: a number such as 1e309 overflows
    fail(std::string("header is not valid JSON: ") + e.what(), 8);
  }
  if (!header.is_object()) fail("header is not a JSON object", 8);
  auto where = [&](const std::string& name) -> std::uint64_t {
    const std::size_t pos = header_text.find(json(name).dump());
    return 8 + (pos == std::string_view::npos ? 0 : pos);
  };
  if (!duplicate.empty()) fail("duplicate tensor name '" + duplicate + "' in the header", where(duplicate));

  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = size - data_start;
  SafetensorsContent out;
  std::vector<Entry> entries;
  for (auto& [name, v] : header.items()) {
    auto at = [&, &key = name] { return where(key); };  // only computed on error (clang 14 cannot capture a binding)
    if (name == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object", at());
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) fail("__metadata__ value of '" + k + "' is not a string", at());
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) fail("entry '" + name + "' is not an object", at());
    Entry e{name, Dtype::Float32, {}, 0, 0};
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail("entry '" + name + "' has no dtype string", at());
    const auto dt = dtype_from_tag(v["dtype"].get<std::string>());
    if (!dt)
      fail("entry '" + name + "' has unknown dtype '" + v["dtype"].get<std::string>() + "' (expected F32, F64 or I64)",
           at());
    e.dtype = *dt;
    if (!v.contains("shape") || !v["shape"].is_array()) fail("entry '" + name + "' has no shape array", at());
    // numel bounded by the data size, so the product never overflows.
    std::uint64_t numel = 1;
    std::int64_t nonzero = 1;
    bool zero = false;
    for (auto& d : v["shape"]) {
      const auto u = as_u64(d);
      if (!u) fail("entry '" + name + "' has a shape entry that is not a non-negative integer: " + d.dump(), at());
      if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail("entry '" + name + "' has a dimension too large: " + std::to_string(*u), at());
      e.shape.push_back(static_cast<std::int64_t>(*u));
      if (*u == 0) zero = true;
      // with a zero size the element count is 0, but the other sizes must still multiply
      // without overflow (as every tensor shape must, see numel_of)
      if (*u != 0 && __builtin_mul_overflow(nonzero, static_cast<std::int64_t>(*u), &nonzero))
        fail("entry '" + name + "' shape " + shape_str(e.shape) + "... has more elements than a 64-bit count holds",
             at());
      if (!zero) {
        if (numel > data_size / *u)
          fail("entry '" + name + "' shape " + shape_str(e.shape) + "... holds more elements than the file's " +
                   std::to_string(data_size) + " data bytes",
               at());
        numel *= *u;
      }
    }
    if (zero) numel = 0;
    const auto& off = v.contains("data_offsets") ? v["data_offsets"] : json();
    if (!off.is_array() || off.size() != 2 || !as_u64(off[0]) || !as_u64(off[1]))
      fail("entry '" + name + "' has no data_offsets [begin, end] of non-negative integers", at());
    e.begin = *as_u64(off[0]);
    e.end = *as_u64(off[1]);
    if (e.begin > e.end)
      fail("entry '" + name + "' has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] with begin > end",
           at());
    if (e.end > data_size)
      fail("entry '" + name + "' data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] run past the end of the data (" + std::to_string(data_size) + " bytes, file ends at " +
               std::to_string(size) + ")",
           data_start + std::min(e.begin, data_size));
    const std::uint64_t want = numel * dtype_size(e.dtype);  // <= data_size * 8: no overflow
    if (want != e.end - e.begin)
      fail("entry '" + name + "' shape " + shape_str(e.shape) + " " + v["dtype"].get<std::string>() + " needs " +
               std::to_string(want) + " bytes but data_offsets [" + std::to_string(e.begin) + ", " +
               std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin),
           at());
    entries.push_back(std::move(e));
  }

  // The data must be covered exactly: sorted by begin, each tensor starts where the last ended.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < cursor)
      fail("data of '" + e.name + "' [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               ") overlaps '" + prev->name + "' [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) +
               ")",
           data_start + e.begin);
    if (e.begin > cursor)
      fail("data is not contiguous: " + std::to_string(e.begin - cursor) + " unused bytes before '" + e.name + "'",
           data_start + cursor);
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_size)
    fail(std::to_string(data_size - cursor) + " bytes after the last tensor are not described by the header",
         data_start + cursor);

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), data + data_start + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

// ---- files -----------------------------------------------------------------------------

namespace {
std::atomic<std::int64_t> g_fail_after{-1};

std::string errno_text(int err) { return std::string(std::strerror(err)); }
}  // namespace

void testing::fail_writes_after(std::optional<std::size_t> bytes) {
  g_fail_after = bytes ? static_cast<std::int64_t>(*bytes) : -1;
}

void atomic_write_file(const std::string& path, const std::uint8_t* bytes, std::size_t size) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.filename().empty()) throw std::runtime_error("atomic_write_file: '" + path + "' names no file");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  static std::atomic<std::uint64_t> counter{0};
  int fd = -1;
  std::string tmp;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    std::string name = ".";
    name += target.filename().string();
    name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    tmp = (dir / name).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    throw std::runtime_error("cannot save '" + path + "': cannot create a temp file in '" + dir.string() +
                             "': " + errno_text(errno));

  std::size_t written = 0;
  auto abort_with = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot save '" + path + "': " + what + " after " + std::to_string(written) + " of " +
                             std::to_string(size) + " bytes: " + errno_text(err) + "; the old file is unchanged");
  };
  const std::int64_t limit = g_fail_after.load();
  while (written < size) {
    std::size_t chunk = std::min<std::size_t>(size - written, std::size_t{1} << 30);
    if (limit >= 0) {
      if (written >= static_cast<std::size_t>(limit)) abort_with("write failed (simulated)", ENOSPC);
      chunk = std::min(chunk, static_cast<std::size_t>(limit) - written);
    }
    const ssize_t w = ::write(fd, bytes + written, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      abort_with("write failed", errno);
    }
    written += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) abort_with("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot save '" + path + "': close failed: " + errno_text(err) +
                             "; the old file is unchanged");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot save '" + path + "': rename of the temp file failed: " + errno_text(err) +
                             "; the old file is unchanged");
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::vector<std::uint8_t> bytes = serialize_safetensors(tensors, metadata);
  atomic_write_file(path, bytes.data(), bytes.size());
}

SafetensorsContent load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "': " + errno_text(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff len = in.tellg();
  if (len < 0) throw std::runtime_error("cannot read '" + path + "': not a regular file");
  in.seekg(0, std::ios::beg);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(len));
  if (len > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), len))
    throw std::runtime_error("cannot read '" + path + "': read failed");
  try {
    return parse_safetensors(bytes.data(), bytes.size());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("'" + path + "': " + e.what());
  }
}

}  // namespace tapegrad
