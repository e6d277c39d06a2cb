#include <tapegrad/data/idx.h>

#include <tapegrad/core/file_io.h>
#include <tapegrad/data/gzip.h>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

namespace tapegrad::data {
namespace {

[[noreturn]] void fail(const std::string& source, std::uint64_t offset, const std::string& what) {
  throw std::runtime_error("IDX " + source + ": " + what + " (at byte offset " + std::to_string(offset) + ")");
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

bool known_type(std::uint8_t code) {
  switch (code) {
    case 0x08: case 0x09: case 0x0B: case 0x0C: case 0x0D: case 0x0E: return true;
    default: return false;
  }
}

std::string dims_str(const std::vector<std::int64_t>& dims) { return shape_str(dims); }

}  // namespace

const char* idx_type_name(IdxType t) {
  switch (t) {
    case IdxType::UInt8: return "uint8";
    case IdxType::Int8: return "int8";
    case IdxType::Int16: return "int16";
    case IdxType::Int32: return "int32";
    case IdxType::Float32: return "float32";
    case IdxType::Float64: return "float64";
  }
  return "unknown";
}

std::size_t idx_type_size(IdxType t) {
  switch (t) {
    case IdxType::UInt8: case IdxType::Int8: return 1;
    case IdxType::Int16: return 2;
    case IdxType::Int32: case IdxType::Float32: return 4;
    case IdxType::Float64: return 8;
  }
  return 1;
}

// ---- parsing -------------------------------------------------------------------------

IdxHeader parse_idx_header(const std::uint8_t* bytes, std::size_t size, const std::string& source,
                           std::uint64_t max_bytes) {
  if (bytes == nullptr && size != 0) throw std::invalid_argument("parse_idx_header: null buffer of nonzero size");
  if (size < 4)
    fail(source, size, "truncated magic number: expected 4 bytes, got " + std::to_string(size));
  const std::uint32_t magic = be32(bytes);
  const std::uint8_t type_code = bytes[2];
  const int ndims = bytes[3];
  if (bytes[0] != 0 || bytes[1] != 0 || !known_type(type_code) || ndims < 1 || ndims > kMaxIdxDims)
    fail(source, 0,
         "bad magic number " + hex32(magic) +
             ": expected 0x0000TTDD with type TT in {08,09,0B,0C,0D,0E} and 1 <= DD <= " +
             std::to_string(kMaxIdxDims));
  IdxHeader h;
  h.type = static_cast<IdxType>(type_code);
  h.header_bytes = 4 + 4 * static_cast<std::size_t>(ndims);
  if (size < h.header_bytes)
    fail(source, size,
         "truncated header: " + std::to_string(ndims) + " dims need " + std::to_string(h.header_bytes) +
             " header bytes, got " + std::to_string(size));
  std::uint64_t count = 1;
  // The product of the nonzero dims is bounded too: a 0 dim must not hide dims whose
  // product overflows int64 later (numel(), Tensor shapes).
  std::uint64_t nonzero = 1;
  bool overflow = false;
  for (int d = 0; d < ndims; ++d) {
    const std::uint32_t n = be32(bytes + 4 + 4 * d);
    h.dims.push_back(static_cast<std::int64_t>(n));
    if (n == 0) {
      count = 0;
      continue;
    }
    // nonzero ≤ 2^64 / 2^32 keeps the product exact; beyond the bound we only flag it.
    if (nonzero > std::numeric_limits<std::uint64_t>::max() / n) overflow = true;
    else nonzero *= n;
    count *= n;
  }
  const std::uint64_t elem = idx_type_size(h.type);
  if (overflow || nonzero > max_bytes / elem)
    fail(source, 4,
         "declared size " + dims_str(h.dims) + " of " + idx_type_name(h.type) + " exceeds the limit of " +
             std::to_string(max_bytes) + " bytes");
  h.payload_bytes = count * elem;
  return h;
}

IdxArray parse_idx(const std::uint8_t* bytes, std::size_t size, const std::string& source,
                   std::uint64_t max_bytes) {
  const IdxHeader h = parse_idx_header(bytes, size, source, max_bytes);
  const std::uint64_t expected = h.header_bytes + h.payload_bytes;
  if (size < expected)
    fail(source, size,
         "truncated data: header declares " + dims_str(h.dims) + " " + idx_type_name(h.type) + " = " +
             std::to_string(h.payload_bytes) + " payload bytes, expected a total of " + std::to_string(expected) +
             " bytes, got " + std::to_string(size));
  if (size > expected)
    fail(source, expected,
         "trailing data: header declares a total of " + std::to_string(expected) + " bytes, got " +
             std::to_string(size));
  IdxArray a;
  a.type = h.type;
  a.dims = h.dims;
  a.payload.assign(bytes + h.header_bytes, bytes + expected);
  return a;
}

// ---- files ----------------------------------------------------------------------------

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const {
    if (f) gzclose(f);
  }
};
using GzPtr = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to n bytes; returns how many were read. Throws on a zlib error (corrupt or
// cut-short gzip stream), naming the decompressed offset.
std::size_t gz_read(gzFile f, std::uint8_t* dst, std::size_t n, const std::string& path, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(f, dst + done, chunk);
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      fail(path, offset + done, std::string("gzip read error: ") + (msg ? msg : "unknown"));
    }
    if (got == 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      if (err == Z_BUF_ERROR)
        fail(path, offset + done, "truncated gzip stream: the compressed file ends before its end marker");
      if (err != Z_OK) fail(path, offset + done, std::string("gzip read error: ") + (msg ? msg : "unknown"));
      break;  // plain end of file; parse_idx reports a short payload
    }
    done += static_cast<std::size_t>(got);
  }
  return done;
}

}  // namespace

IdxArray read_idx(const std::string& path, std::uint64_t max_bytes) {
  GzPtr f(gzopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error("IDX " + path + ": cannot open file: " + std::strerror(errno));
  gzbuffer(f.get(), 1 << 17);
  // Header first (magic, then the dims it announces), so the payload allocation is
  // bounded by the declared size and max_bytes.
  std::vector<std::uint8_t> buf(4);
  std::size_t got = gz_read(f.get(), buf.data(), 4, path, 0);
  if (got == 4 && buf[3] >= 1 && buf[3] <= kMaxIdxDims) {
    const std::size_t header_bytes = 4 + 4 * std::size_t{buf[3]};
    buf.resize(header_bytes);
    got += gz_read(f.get(), buf.data() + 4, header_bytes - 4, path, 4);
  }
  buf.resize(got);
  const IdxHeader h = parse_idx_header(buf.data(), buf.size(), path, max_bytes);
  // Payload plus one byte (to detect trailing data), read in growing chunks: the buffer
  // follows the data actually present, so a header that declares gigabytes over a short
  // file costs no more memory than the file holds.
  const std::size_t total = h.header_bytes + static_cast<std::size_t>(h.payload_bytes) + 1;
  std::size_t have = h.header_bytes;
  while (have < total) {
    const std::size_t chunk = std::min(total - have, std::max<std::size_t>(have, std::size_t{1} << 20));
    buf.resize(have + chunk);
    const std::size_t n = gz_read(f.get(), buf.data() + have, chunk, path, have);
    have += n;
    if (n < chunk) break;
  }
  buf.resize(have);
  // gzread stops quietly at bytes after the last gzip member (a corrupt or joined file):
  // a complete payload is checked once more, as read_csv's reader checks it
  if (have + 1 == total && gzdirect(f.get()) == 0) check_gzip_trailer(path, "IDX");
  return parse_idx(buf.data(), buf.size(), path, max_bytes);
}

std::vector<std::uint8_t> encode_idx(const IdxArray& a) {
  if (a.dims.empty() || a.dims.size() > static_cast<std::size_t>(kMaxIdxDims))
    throw std::invalid_argument("encode_idx: expected 1 to " + std::to_string(kMaxIdxDims) + " dims, got " +
                                std::to_string(a.dims.size()));
  std::uint64_t count = 1;
  for (auto d : a.dims) {
    if (d < 0 || d > 0xFFFFFFFFll) throw std::invalid_argument("encode_idx: dim out of range in " + dims_str(a.dims));
    count *= static_cast<std::uint64_t>(d);
  }
  if (count * idx_type_size(a.type) != a.payload.size())
    throw std::invalid_argument("encode_idx: dims " + dims_str(a.dims) + " of " + idx_type_name(a.type) + " need " +
                                std::to_string(count * idx_type_size(a.type)) + " payload bytes, got " +
                                std::to_string(a.payload.size()));
  std::vector<std::uint8_t> out;
  out.reserve(4 + 4 * a.dims.size() + a.payload.size());
  out.push_back(0);
  out.push_back(0);
  out.push_back(static_cast<std::uint8_t>(a.type));
  out.push_back(static_cast<std::uint8_t>(a.dims.size()));
  for (auto d : a.dims) {
    const auto v = static_cast<std::uint32_t>(d);
    out.push_back(static_cast<std::uint8_t>(v >> 24));
    out.push_back(static_cast<std::uint8_t>(v >> 16));
    out.push_back(static_cast<std::uint8_t>(v >> 8));
    out.push_back(static_cast<std::uint8_t>(v));
  }
  out.insert(out.end(), a.payload.begin(), a.payload.end());
  return out;
}

void write_idx(const std::string& path, const IdxArray& array, bool gzip) {
  std::vector<std::uint8_t> bytes = encode_idx(array);
  if (gzip) {  // compressed in memory (gzip wrapper: windowBits 15 + 16), then one atomic write
    if (bytes.size() > std::numeric_limits<uInt>::max())
      throw std::invalid_argument("write_idx: " + std::to_string(bytes.size()) +
                                  " bytes is above the 4 GiB a gzip write supports; write it uncompressed");
    z_stream z{};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("write_idx: cannot start the gzip compressor for " + path);
    std::vector<std::uint8_t> out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 64);
    z.next_in = bytes.data();
    z.avail_in = static_cast<uInt>(bytes.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    const std::size_t n = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("write_idx: gzip compression failed for " + path);
    out.resize(n);
    bytes.swap(out);
  }
  // A regular file is replaced atomically, a symlink written through, anything else refused.
  atomic_write_file(path, bytes.data(), bytes.size());
}

// ---- decoding --------------------------------------------------------------------------

std::int64_t IdxArray::numel() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

namespace {
// Decodes element i of a big-endian payload.
double decode(IdxType t, const std::uint8_t* p) {
  switch (t) {
    case IdxType::UInt8: return p[0];
    case IdxType::Int8: return static_cast<std::int8_t>(p[0]);
    case IdxType::Int16: return static_cast<std::int16_t>((std::uint16_t{p[0]} << 8) | p[1]);
    case IdxType::Int32: return static_cast<std::int32_t>(be32(p));
    case IdxType::Float32: {
      const std::uint32_t u = be32(p);
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case IdxType::Float64: {
      const std::uint64_t u = (std::uint64_t{be32(p)} << 32) | be32(p + 4);
      double d;
      std::memcpy(&d, &u, 8);
      return d;
    }
  }
  return 0.0;
}
}  // namespace

double IdxArray::value(std::int64_t i) const {
  if (i < 0 || i >= numel())
    throw std::out_of_range("IdxArray::value: index " + std::to_string(i) + " out of range for " + dims_str(dims));
  return decode(type, payload.data() + static_cast<std::size_t>(i) * idx_type_size(type));
}

Tensor IdxArray::to_float32(double scale) const {
  Tensor t = Tensor::empty(dims, Dtype::Float32);
  float* out = t.data<float>();
  const std::int64_t n = numel();
  const std::size_t es = idx_type_size(type);
  if (type == IdxType::UInt8) {
    const float s = static_cast<float>(scale);
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(payload[i]) * s;
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(decode(type, payload.data() + i * es) * scale);
  }
  return t;
}

Tensor IdxArray::to_int64() const {
  if (type == IdxType::Float32 || type == IdxType::Float64)
    throw std::invalid_argument(std::string("IdxArray::to_int64: expected an integer IDX type, got ") +
                                idx_type_name(type));
  Tensor t = Tensor::empty(dims, Dtype::Int64);
  std::int64_t* out = t.data<std::int64_t>();
  const std::int64_t n = numel();
  const std::size_t es = idx_type_size(type);
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(decode(type, payload.data() + i * es));
  return t;
}

}  // namespace tapegrad::data
