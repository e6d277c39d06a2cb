#include <tapegrad/core/safetensors.h>
#include <tapegrad/core/safetensors_checksum.h>
#include <tapegrad/core/enum_names.h>

#include <fcntl.h>
#include <sys/stat.h>
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
#include <unordered_set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tapegrad {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; this reader copies bytes as they are");

namespace {

using json = nlohmann::json;

// The safetensors dtype tags, written and read.
constexpr NamedValue<Dtype> kDtypeTags[] = {{Dtype::Float32, "F32"}, {Dtype::Float64, "F64"}, {Dtype::Int64, "I64"}};

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

// nlohmann's DOM builder plus two checks: duplicate top-level names (nlohmann keeps the
// last silently) and nesting deeper than the format's object -> entry -> array.
struct DedupSax {
  explicit DedupSax(json& out) : dom(out, true) {}
  nlohmann::detail::json_sax_dom_parser<json> dom;
  int depth = 0;
  bool too_deep = false;
  std::unordered_set<std::string> names;
  std::string duplicate;

  bool open() {
    if (++depth > 3) too_deep = true;
    return !too_deep;
  }
  bool null() { return dom.null(); }
  bool boolean(bool v) { return dom.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom.number_float(v, s); }
  bool string(json::string_t& v) { return dom.string(v); }
  bool binary(json::binary_t& v) { return dom.binary(v); }
  bool start_object(std::size_t n) { return open() && dom.start_object(n); }
  bool end_object() {
    --depth;
    return dom.end_object();
  }
  bool start_array(std::size_t n) { return open() && dom.start_array(n); }
  bool end_array() {
    --depth;
    return dom.end_array();
  }
  bool key(json::string_t& k) {
    if (depth == 1 && !names.insert(k).second && duplicate.empty()) duplicate = k;
    return dom.key(k);
  }
  // Kept, not thrown: nlohmann's DOM builder rethrows a sliced copy that loses the position.
  std::size_t error_pos = 0;
  std::string error;
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    error_pos = pos;
    error = ex.what();
    return false;
  }
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
  // The header text is built entry by entry (nlohmann's ordered_json inserts by linear
  // search: quadratic in the entry count).
  std::string text = "{";
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  try {
    if (metadata.count(kSafetensorsChecksumKey))
      throw std::invalid_argument(std::string("save_safetensors: the metadata key '") + kSafetensorsChecksumKey +
                                  "' is reserved (the per-tensor checksums)");
    std::map<std::string, std::string> md = metadata;  // with the checksums (core/safetensors_checksum.h)
    if (!tensors.empty()) md[kSafetensorsChecksumKey] = safetensors_checksums(tensors);
    if (!md.empty()) text += "\"__metadata__\":" + json(md).dump();
    for (auto& [name, t] : tensors) {
      if (name.empty()) throw std::invalid_argument("save_safetensors: empty tensor name");
      if (name == "__metadata__") throw std::invalid_argument("save_safetensors: '__metadata__' is a reserved name");
      if (!seen.insert(name).second)
        throw std::invalid_argument("save_safetensors: duplicate tensor name '" + name + "'");
      if (!t.defined()) throw std::invalid_argument("save_safetensors: tensor '" + name + "' is undefined");
      if (text.size() > 1) text += ',';
      text += json(name).dump();
      text += ":{\"dtype\":\"";
      text += name_of(kDtypeTags, t.dtype());
      text += "\",\"shape\":" + json(t.shape()).dump();
      text += ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.nbytes()) + "]}";
      offset += t.nbytes();
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("save_safetensors: a name or metadata string is not valid UTF-8: ") +
                                e.what());
  }
  text += '}';
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
  // A header that cannot fit the file, or JSON that does not open with '{', says the file is
  // something else (a CSV, an image, a PyTorch pickle): said first, before the details.
  if (n > size - 8)
    fail("not a safetensors file: header length " + std::to_string(n) + " runs past the end of the file (" +
             std::to_string(size) + " bytes, header would end at " +
             (n > std::numeric_limits<std::uint64_t>::max() - 8 ? std::string("past 2^64") : std::to_string(8 + n)) +
             ")" +
             (n > kSafetensorsMaxHeader ? " and exceeds the limit of " + std::to_string(kSafetensorsMaxHeader) : ""),
         0);
  if (n > kSafetensorsMaxHeader)
    fail("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kSafetensorsMaxHeader), 0);
  if (n == 0 || data[8] != '{') fail("not a safetensors file: header does not start with '{'", 8);
  const char* text = reinterpret_cast<const char*>(data + 8);
  const std::string_view header_text(text, n);

  // Parse, rejecting duplicate names and nesting deeper than the format uses. A SAX
  // handler around nlohmann's DOM builder: linear in the header size (nlohmann's callback
  // parser rescans the top-level object after every entry, quadratic in the entry count).
  json header;
  DedupSax sax(header);
  try {
    const bool ok = json::sax_parse(text, text + n, &sax, json::input_format_t::json, true, false);
    if (sax.too_deep) fail("header JSON is nested deeper than the format allows", 8);
    if (!sax.error.empty())
      fail("header is not valid JSON: " + sax.error, 8 + (sax.error_pos > 0 ? sax.error_pos - 1 : 0));
    if (!ok) fail("header is not valid JSON", 8);
  } catch (const json::parse_error& e) {
    fail(std::string("header is not valid JSON: ") + e.what(), 8 + (e.byte > 0 ? e.byte - 1 : 0));
  } catch (const json::exception& e) {  // e.g. out_of_range 406: a number such as 1e309 overflows
    fail(std::string("header is not valid JSON: ") + e.what(), 8);
  }
  const std::string& duplicate = sax.duplicate;
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
    // what the writer refuses (save_safetensors: empty tensor name) is refused on reading too
    if (name.empty()) fail("a tensor has an empty name (expected a non-empty key)", at());
    if (!v.is_object()) fail("entry '" + name + "' is not an object", at());
    Entry e{name, Dtype::Float32, {}, 0, 0};
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail("entry '" + name + "' has no dtype string", at());
    const auto dt = value_named(kDtypeTags, v["dtype"].get<std::string>());
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
  verify_safetensors_checksums(out);  // a flipped bit in the data names its tensor
  return out;
}

// ---- files -----------------------------------------------------------------------------

namespace {
std::string errno_text(int err) { return std::string(std::strerror(err)); }
}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::vector<std::uint8_t> bytes = serialize_safetensors(tensors, metadata);
  atomic_write_file(path, bytes.data(), bytes.size());
}

SafetensorsContent load_safetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + errno_text(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) throw std::runtime_error("cannot read '" + path + "': " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error("cannot read '" + path + "': it is " +
                             (S_ISDIR(st.st_mode)    ? std::string("a directory")
                              : S_ISCHR(st.st_mode)  ? std::string("a character device")
                              : S_ISFIFO(st.st_mode) ? std::string("a FIFO")
                                                     : std::string("not a regular file")) +
                             ", expected a safetensors file");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + got, std::min<std::size_t>(bytes.size() - got, std::size_t{1} << 30));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error("cannot read '" + path + "': " + errno_text(errno));
    if (r == 0) break;  // shrank while reading: parse what is there (the parser checks sizes)
    got += static_cast<std::size_t>(r);
  }
  bytes.resize(got);
  try {
    return parse_safetensors(bytes.data(), bytes.size());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("'" + path + "': " + e.what());
  }
}

}  // namespace tapegrad
