// libFuzzer target for parse_safetensors (the checkpoint reader's pure byte-buffer parser).
//
// Contract checked: any input either parses or throws std::runtime_error (anything else,
// a crash or a sanitizer report is a bug); a parsed file serializes and parses back to
// the same names, metadata, shapes, dtypes and bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/safetensors.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tapegrad;
  SafetensorsContent c;
  try {
    c = parse_safetensors(data, size);
  } catch (const std::runtime_error&) {
    return 0;
  }
  std::vector<std::uint8_t> again;
  try {
    again = serialize_safetensors(c.tensors, c.metadata);
  } catch (const std::invalid_argument&) {
    std::abort();  // whatever the parser accepts must be writable
  }
  const SafetensorsContent d = parse_safetensors(again.data(), again.size());
  if (d.tensors.size() != c.tensors.size() || d.metadata != c.metadata) std::abort();
  for (std::size_t i = 0; i < c.tensors.size(); ++i) {
    const Tensor &a = c.tensors[i].second, &b = d.tensors[i].second;
    if (d.tensors[i].first != c.tensors[i].first || a.shape() != b.shape() || a.dtype() != b.dtype() ||
        a.nbytes() != b.nbytes() || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0)
      std::abort();
  }
  return 0;
}
