#pragma once
// IDX files (LeCun's MNIST format, also used by Fashion-MNIST): a 4-byte magic number
// 0x00 0x00 <type> <ndims>, then ndims big-endian uint32 sizes, then the values in
// row-major order, big-endian. Format: http://yann.lecun.com/exdb/mnist/ ("FILE FORMATS").
//
// parse_idx() is a pure parser over a byte buffer (what a fuzzer calls); read_idx() reads
// a gzip or plain file through zlib, holding at most the header-declared size (bounded by
// max_bytes) plus one byte, and never much more than the data the file really contains.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::data {

/// Element type codes of the IDX format (third byte of the magic number).
enum class IdxType : std::uint8_t {
  UInt8 = 0x08,
  Int8 = 0x09,
  Int16 = 0x0B,
  Int32 = 0x0C,
  Float32 = 0x0D,
  Float64 = 0x0E,
};

/// "uint8", "int8", "int16", "int32", "float32", "float64".
const char* idx_type_name(IdxType t);
/// Bytes per element of an IDX type: 1, 1, 2, 4, 4, 8.
std::size_t idx_type_size(IdxType t);

/// Default bound on an IDX payload: 1 GiB (Fashion-MNIST's largest file is 47 MB).
constexpr std::uint64_t kMaxIdxBytes = std::uint64_t{1} << 30;
/// Largest rank accepted (the format allows 255; real files use 1 to 4).
constexpr int kMaxIdxDims = 16;

/// A decoded IDX header.
struct IdxHeader {
  /// The element type (the magic number's third byte).
  IdxType type = IdxType::UInt8;
  /// The sizes per dimension, as stored.
  std::vector<std::int64_t> dims;
  std::size_t header_bytes = 0;   ///< 4 + 4·ndims: the payload's byte offset
  std::uint64_t payload_bytes = 0;  ///< product(dims) · element size
};

/// A whole IDX array. `payload` keeps the file's big-endian bytes; the accessors decode.
struct IdxArray {
  /// The element type.
  IdxType type = IdxType::UInt8;
  /// The sizes per dimension.
  std::vector<std::int64_t> dims;
  /// The elements as stored (big-endian), product(dims) · idx_type_size(type) bytes.
  std::vector<std::uint8_t> payload;

  /// Number of elements: the product of dims.
  std::int64_t numel() const;
  /// Element i (flat, row-major) as double. Throws std::out_of_range.
  double value(std::int64_t i) const;
  /// All values as a float32 tensor of shape `dims`, each multiplied by `scale`
  /// (1/255 maps uint8 pixels to [0, 1]).
  Tensor to_float32(double scale = 1.0) const;
  /// All values as an int64 tensor of shape `dims`; throws std::invalid_argument for
  /// float types.
  Tensor to_int64() const;
};

/// Parses the header at the start of `bytes`. `source` names the buffer in messages.
/// Throws std::runtime_error naming `source` and the byte offset when the magic number is
/// bad (first two bytes not zero, unknown type code, ndims 0 or > kMaxIdxDims), the header
/// is cut short, or the declared payload exceeds max_bytes.
IdxHeader parse_idx_header(const std::uint8_t* bytes, std::size_t size, const std::string& source = "<buffer>",
                           std::uint64_t max_bytes = kMaxIdxBytes);

/// Parses a whole IDX buffer: header checks as parse_idx_header, then the payload must
/// be exactly the declared size. Throws std::runtime_error naming `source`, the byte offset
/// where the data ends and the expected size when truncated, or the offset of the first
/// extra byte when there is trailing data. Never allocates more than the declared
/// payload, and only after checking that those bytes are present.
IdxArray parse_idx(const std::uint8_t* bytes, std::size_t size, const std::string& source = "<buffer>",
                   std::uint64_t max_bytes = kMaxIdxBytes);

/// Reads an IDX file, gzip-compressed (".gz") or plain (zlib reads both transparently).
/// Throws std::runtime_error naming the path: cannot open, gzip stream corrupt or cut
/// short (with the decompressed byte offset), and every parse_idx error.
IdxArray read_idx(const std::string& path, std::uint64_t max_bytes = kMaxIdxBytes);

/// Encodes an array as IDX bytes (the inverse of parse_idx). Throws std::invalid_argument
/// when the payload size does not match the dims.
std::vector<std::uint8_t> encode_idx(const IdxArray& array);
/// Writes an IDX file, gzip-compressed when `gzip`, atomically (core/file_io.h: a regular
/// file or new path is replaced, a symlink written through, anything else refused). Throws
/// std::runtime_error on I/O errors. Arrays above 4 GB are not supported with gzip.
void write_idx(const std::string& path, const IdxArray& array, bool gzip);

}  // namespace tapegrad::data
