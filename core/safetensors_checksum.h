#pragma once
// Per-tensor checksums of safetensors files: serialize_safetensors stores the CRC-32C
// (Castagnoli, as iSCSI and ext4 use it) of every tensor's data bytes in the metadata, and
// parse_safetensors verifies them, so a flipped bit in a checkpoint's data is an error naming
// the tensor (and, through load_safetensors, the file) instead of a silent resume.
//
// The metadata key kSafetensorsChecksumKey holds a JSON object {"<tensor name>": "<8 lower-case
// hex digits>"}; it is the writer's, refused in user metadata, and removed from
// SafetensorsContent::metadata once verified. Files without it (other writers, older files)
// load unchecked.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

struct SafetensorsContent;

/// The metadata key of the per-tensor checksums.
inline constexpr const char* kSafetensorsChecksumKey = "tapegrad.crc32c";

/// CRC-32C of `size` bytes (crc32c("123456789") == 0xe3069283).
std::uint32_t crc32c(const void* data, std::size_t size);

/// The checksum entry's text for `tensors` (the JSON object described above). Undefined
/// tensors are skipped (the writer refuses them).
std::string safetensors_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors);

/// Verifies and removes kSafetensorsChecksumKey of `content` (nothing when absent). Throws
/// std::runtime_error naming the tensor for a checksum that does not match its data, a tensor
/// without a checksum or a checksum without a tensor, and for a malformed entry.
void verify_safetensors_checksums(SafetensorsContent& content);

}  // namespace tapegrad
