// libFuzzer target for data::parse_idx (the IDX reader's pure byte-buffer parser).
//
// Contract checked: any input either parses or throws std::runtime_error (anything else,
// a crash or a sanitizer report is a bug); a parsed array decodes every element and
// encodes back to exactly the input bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include <tapegrad/data/idx.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tapegrad::data;
  IdxArray a;
  try {
    // A small payload bound keeps each run fast; the bound itself is part of the contract.
    a = parse_idx(data, size, "<fuzz>", std::uint64_t{1} << 20);
  } catch (const std::runtime_error&) {
    return 0;
  }
  const std::int64_t n = a.numel();
  if (n < 0 || static_cast<std::uint64_t>(n) * idx_type_size(a.type) != a.payload.size()) std::abort();
  volatile double sink = 0;
  for (std::int64_t i = 0; i < n; ++i) sink = a.value(i);
  if (n <= 4096) {
    tapegrad::Tensor t = a.to_float32();
    if (t.numel() != n) std::abort();
  }
  const std::vector<std::uint8_t> back = encode_idx(a);
  if (back.size() != size || !std::equal(back.begin(), back.end(), data)) std::abort();
  return 0;
}
