#pragma once
// Builders for crafted torch.save archives and pickles (tests/io): a minimal zip writer
// (stored or deflated records, with header fields that can lie) and a pickle writer that
// emits the opcodes torch.save uses.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace tapegrad::io_test {

using Bytes = std::vector<std::uint8_t>;

inline std::string fixture(const std::string& name) {
  return std::string(TAPEGRAD_TESTS_DIR) + "/fixtures/torch/" + name;
}
inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}
inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// ---- zip -------------------------------------------------------------------------------
struct ZipEntry {
  std::string name;
  Bytes data;
  bool deflate = false;
  std::optional<std::uint32_t> declared_size;  ///< lie about the uncompressed size
  std::uint16_t method_override = 0xffff;      ///< write this compression method instead
};

inline void put16(Bytes& b, std::uint32_t v) { b.push_back(v & 0xff); b.push_back((v >> 8) & 0xff); }
inline void put32(Bytes& b, std::uint32_t v) { put16(b, v & 0xffff); put16(b, v >> 16); }

inline Bytes raw_deflate(const Bytes& in) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&z, static_cast<uLong>(in.size())) + 16);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline Bytes make_zip(const std::vector<ZipEntry>& entries) {
  Bytes out, central;
  for (const auto& e : entries) {
    const Bytes body = e.deflate ? raw_deflate(e.data) : e.data;
    const std::uint16_t method = e.method_override != 0xffff ? e.method_override : (e.deflate ? 8 : 0);
    const std::uint32_t crc = static_cast<std::uint32_t>(crc32(0, e.data.data(), static_cast<uInt>(e.data.size())));
    const std::uint32_t usize = e.declared_size.value_or(static_cast<std::uint32_t>(e.data.size()));
    const std::uint32_t offset = static_cast<std::uint32_t>(out.size());
    put32(out, 0x04034b50); put16(out, 20); put16(out, 0); put16(out, method); put16(out, 0); put16(out, 0x21);
    put32(out, crc); put32(out, static_cast<std::uint32_t>(body.size())); put32(out, usize);
    put16(out, static_cast<std::uint32_t>(e.name.size())); put16(out, 0);
    out.insert(out.end(), e.name.begin(), e.name.end());
    out.insert(out.end(), body.begin(), body.end());
    put32(central, 0x02014b50); put16(central, 20); put16(central, 20); put16(central, 0); put16(central, method);
    put16(central, 0); put16(central, 0x21); put32(central, crc); put32(central, static_cast<std::uint32_t>(body.size()));
    put32(central, usize); put16(central, static_cast<std::uint32_t>(e.name.size())); put16(central, 0); put16(central, 0);
    put16(central, 0); put16(central, 0); put32(central, 0); put32(central, offset);
    central.insert(central.end(), e.name.begin(), e.name.end());
  }
  const std::uint32_t cd_offset = static_cast<std::uint32_t>(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, 0x06054b50); put16(out, 0); put16(out, 0);
  put16(out, static_cast<std::uint32_t>(entries.size())); put16(out, static_cast<std::uint32_t>(entries.size()));
  put32(out, static_cast<std::uint32_t>(central.size())); put32(out, cd_offset); put16(out, 0);
  return out;
}

// ---- pickle ----------------------------------------------------------------------------
struct Pickle {
  Bytes b;
  Pickle& op(std::uint8_t c) { b.push_back(c); return *this; }
  Pickle& raw(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); return *this; }
  Pickle& proto(int v = 2) { return op(0x80).op(static_cast<std::uint8_t>(v)); }
  Pickle& global(const std::string& module, const std::string& name) { return op('c').raw(module + "\n" + name + "\n"); }
  Pickle& str(const std::string& s) {
    op('X');
    put32(b, static_cast<std::uint32_t>(s.size()));
    return raw(s);
  }
  Pickle& integer(std::int64_t v) {
    if (v >= 0 && v < 256) return op('K').op(static_cast<std::uint8_t>(v));
    op(0x8a).op(8);
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i)));
    return *this;
  }
  Pickle& ints(const std::vector<std::int64_t>& v) {
    op('(');
    for (auto x : v) integer(x);
    return op('t');
  }
  Pickle& mark() { return op('('); }
  Pickle& stop() { return op('.'); }
  /// _rebuild_tensor_v2(('storage', torch.<type>, key, 'cpu', numel), offset, size, stride, False, OrderedDict())
  Pickle& tensor(const std::string& type, const std::string& key, std::int64_t numel, std::int64_t offset,
                 const std::vector<std::int64_t>& size, const std::vector<std::int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2").mark();
    mark().str("storage").global("torch", type).str(key).str("cpu").integer(numel).op('t').op('Q');
    integer(offset).ints(size).ints(stride).op(0x89);
    global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  /// OrderedDict() followed by MARK: add str/tensor pairs, then end_dict().
  Pickle& begin_dict() { return proto().global("collections", "OrderedDict").op(')').op('R').mark(); }
  Pickle& end_dict() { return op('u').stop(); }
};

/// A torch.save-like archive: <prefix>data.pkl, <prefix>data/<key> records, byteorder, version.
inline Bytes torch_zip(const Bytes& pickle, const std::vector<std::pair<std::string, Bytes>>& records,
                       const std::string& prefix = "archive/", const std::string& byteorder = "little") {
  std::vector<ZipEntry> e{{prefix + "data.pkl", pickle}};
  if (!byteorder.empty()) e.push_back({prefix + "byteorder", Bytes(byteorder.begin(), byteorder.end())});
  for (const auto& [k, d] : records) e.push_back({prefix + "data/" + k, d});
  e.push_back({prefix + "version", Bytes{'3', '\n'}});
  return make_zip(e);
}

template <class T>
Bytes le_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace tapegrad::io_test
