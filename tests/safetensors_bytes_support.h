#pragma once
// Safetensors files written byte by byte, for the reader's refusals: the 8-byte little-endian
// header length, the header text, then the data; and the message the reader gives for them.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/safetensors.h>

namespace tapegrad::test {

/// The bytes of a file holding `header` and then `data_bytes` bytes from `data` (zeros when
/// data is null).
inline std::vector<std::uint8_t> safetensors_file(const std::string& header, const void* data, std::size_t data_bytes) {
  std::vector<std::uint8_t> file(8 + header.size() + data_bytes, 0);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
  std::memcpy(file.data() + 8, header.data(), header.size());
  if (data && data_bytes) std::memcpy(file.data() + 8 + header.size(), data, data_bytes);
  return file;
}
inline std::vector<std::uint8_t> safetensors_file(const std::string& header, const std::vector<std::uint8_t>& data = {}) {
  return safetensors_file(header, data.data(), data.size());
}

/// The message of the std::runtime_error (or a subclass) parse_safetensors throws for `bytes`;
/// "" when they parse.
inline std::string safetensors_parse_error(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_safetensors(bytes.data(), bytes.size());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tapegrad::test
