#pragma once
// safetensors: a flat file of named tensors (https://github.com/huggingface/safetensors).
//
// Layout: 8-byte little-endian header length N, then N bytes of JSON
//   {"name": {"dtype": "F32"|"F64"|"I64", "shape": [...], "data_offsets": [begin, end]},
//    "__metadata__": {string: string}}
// (padded with spaces to a multiple of 8), then the raw little-endian tensor bytes;
// data_offsets are relative to the first byte after the header.
//
// The reader trusts nothing: every problem in a truncated, corrupted or hostile file is a
// std::runtime_error naming what is wrong and the file byte offset where it was found.
// It never allocates more than the file holds.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/file_io.h>  // atomic_write_file
#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Tensors in file order (ascending data_offsets), plus the "__metadata__" strings.
struct SafetensorsContent {
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< (name, tensor) in file order
  std::map<std::string, std::string> metadata;           ///< the "__metadata__" strings
  /// The tensor named `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

/// Largest header accepted by the reader (100 MB), like the reference implementation.
constexpr std::uint64_t kSafetensorsMaxHeader = 100ull * 1000 * 1000;

/// The file's bytes for `tensors` (written in the given order) and `metadata`, plus each
/// tensor's CRC-32C under the metadata key kSafetensorsChecksumKey (core/safetensors_checksum.h).
/// Throws std::invalid_argument for an undefined tensor, an empty or duplicate name, the
/// reserved name "__metadata__" or the reserved metadata key kSafetensorsChecksumKey.
std::vector<std::uint8_t> serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                const std::map<std::string, std::string>& metadata = {});

/// Parses a whole file held in memory. Pure function of the bytes (a fuzzing entry point).
/// Throws std::runtime_error naming the problem and its byte offset: buffer shorter than
/// 8 bytes, header length past the end of the buffer or a header not starting with '{'
/// (both say "not a safetensors file" first: a CSV or a pickle given as a checkpoint),
/// header length above kSafetensorsMaxHeader, bad
/// JSON, duplicate names, a non-string metadata value, unknown dtype, negative or
/// overflowing shape, data_offsets that are not [begin <= end], not contiguous from 0,
/// overlapping, out of range or not covering the data exactly, shape × dtype size ≠
/// end - begin; a tensor whose data does not match its stored checksum (naming the tensor;
/// files without checksums load unchecked, and the checksum key is not returned in metadata).
SafetensorsContent parse_safetensors(const std::uint8_t* data, std::size_t size);

/// Writes `tensors` to `path` atomically (core/file_io.h: a regular file or a new path is
/// replaced, a symbolic link is written through, anything else is refused).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and parses `path`. Throws std::runtime_error naming the path when it cannot be
/// read, and as parse_safetensors for bad content.
SafetensorsContent load_safetensors(const std::string& path);


}  // namespace tapegrad
