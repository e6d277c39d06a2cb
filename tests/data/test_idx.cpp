// Corrupt IDX data (docs/errors.md, "Files"): every malformed buffer gets a
// std::runtime_error naming the problem and the byte offset, never a crash. The last
// case is a regression found by fuzz/fuzz_idx.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <tapegrad/data/idx.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {
using Bytes = std::vector<std::uint8_t>;
Bytes be32(std::uint32_t v) {
  return {static_cast<std::uint8_t>(v >> 24), static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 8),
          static_cast<std::uint8_t>(v)};
}
// magic 00 00 <type> <ndims>, the dims, then `payload`.
Bytes idx(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims) {
    const Bytes e = be32(d);
    b.insert(b.end(), e.begin(), e.end());
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}
std::string parse_error(const Bytes& b) {
  return thrown<std::runtime_error>([&] { parse_idx(b.data(), b.size(), "buf"); });
}
}  // namespace

TEST_CASE("errors: a corrupt IDX buffer names the problem and the byte offset", "[errors]") {
  // Valid: uint8 (2, 3).
  const Bytes ok = idx(0x08, {2, 3}, {1, 2, 3, 4, 5, 6});
  const IdxArray a = parse_idx(ok.data(), ok.size());
  CHECK(a.dims == std::vector<std::int64_t>{2, 3});
  CHECK(a.value(5) == 6);

  CHECK_THAT(parse_error(Bytes{0, 0, 8}), Contains("truncated magic") && Contains("byte offset 3"));
  CHECK_THAT(parse_error(idx(0x07, {2}, {1, 2})), Contains("bad magic number 0x00000701") && Contains("byte offset 0"));
  CHECK_THAT(parse_error(Bytes{1, 0, 8, 1, 0, 0, 0, 1, 9}), Contains("bad magic number"));
  CHECK_THAT(parse_error(Bytes{0, 0, 8, 2, 0, 0, 0, 2}), Contains("truncated header") && Contains("12 header bytes"));
  const Bytes short_payload(ok.begin(), ok.end() - 2);
  CHECK_THAT(parse_error(short_payload), Contains("truncated data") && Contains("[2, 3]") &&
                                             Contains("expected a total of 18 bytes, got 16") &&
                                             Contains("byte offset 16"));
  Bytes extra = ok;
  extra.push_back(0);
  CHECK_THAT(parse_error(extra), Contains("trailing data") && Contains("byte offset 18"));
  // A header that declares more than the limit is refused before anything is allocated.
  CHECK_THAT(parse_error(idx(0x0E, {65536, 65536}, {})), Contains("exceeds the limit") && Contains("[65536, 65536]"));
  CHECK_THAT(thrown<std::runtime_error>([&] { parse_idx(ok.data(), ok.size(), "small", 5); }),
             Contains("exceeds the limit of 5 bytes"));
}

TEST_CASE("errors: an IDX header with a zero dim cannot hide an overflowing shape", "[errors]") {
  // Found by fuzz_idx: dims (0, 2^32-1, 2^32-1) declare 0 bytes, but numel() and tensor
  // shapes multiplied the dims in int64 and overflowed (undefined behaviour). Such a header
  // is now refused like any other oversized one.
  CHECK_THAT(parse_error(idx(0x08, {0, 0xFFFFFFFFu, 0xFFFFFFFFu}, {})),
             Contains("exceeds the limit") && Contains("[0, 4294967295, 4294967295]"));
  // An honest empty array still parses: (0, 28, 28) images.
  const Bytes empty = idx(0x08, {0, 28, 28}, {});
  const IdxArray a = parse_idx(empty.data(), empty.size());
  CHECK(a.numel() == 0);
  CHECK(a.to_float32().shape() == Shape{0, 28, 28});
}
