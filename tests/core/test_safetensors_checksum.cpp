// core/safetensors_checksum.h: every tensor's CRC-32C in the file's metadata, verified by the
// one reader: a flipped bit in the data names the tensor; files without checksums still load.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include <tapegrad/core/random.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/core/safetensors_checksum.h>
#include "safetensors_bytes_support.h"

using namespace tapegrad;
using tapegrad::test::safetensors_file;
using tapegrad::test::safetensors_parse_error;

namespace {

std::vector<std::pair<std::string, Tensor>> two_tensors() {
  Generator g(1);
  return {{"a", randn({4, 3}, Dtype::Float32, g)}, {"b", Tensor::from_int64({1, 2, 3}, {3})}};
}

}  // namespace

TEST_CASE("crc32c matches the standard check value", "[checkpoint][checksum]") {
  CHECK(crc32c("123456789", 9) == 0xe3069283u);
  CHECK(crc32c("", 0) == 0u);
}

TEST_CASE("a flipped bit in a safetensors file's data names the tensor", "[checkpoint][checksum][errors]") {
  const auto tensors = two_tensors();
  const std::vector<std::uint8_t> good = serialize_safetensors(tensors, {{"note", "x"}});
  const SafetensorsContent c = parse_safetensors(good.data(), good.size());
  CHECK(c.metadata == std::map<std::string, std::string>{{"note", "x"}});  // the checksums are the reader's
  std::uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  std::vector<std::uint8_t> bad = good;
  bad[8 + n + 5] ^= 0x01;  // a bit of 'a'
  CHECK_THAT(safetensors_parse_error(bad), Catch::Contains("tensor 'a': its data does not match its checksum"));
  bad = good;
  bad[bad.size() - 1] ^= 0x80;  // the last byte of 'b'
  CHECK_THAT(safetensors_parse_error(bad), Catch::Contains("tensor 'b'"));
}

TEST_CASE("a file without checksums loads; the checksum key is reserved", "[checkpoint][checksum][errors]") {
  // The same tensors by a writer that stores no checksums: header written by hand.
  const std::string header = R"({"x":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
  const std::int64_t v[2] = {7, -1};
  const std::vector<std::uint8_t> file = safetensors_file(header, v, sizeof v);
  const SafetensorsContent c = parse_safetensors(file.data(), file.size());
  REQUIRE(c.tensors.size() == 1);
  CHECK(c.tensors[0].second.data<std::int64_t>()[1] == -1);
  CHECK_THROWS_WITH(serialize_safetensors(two_tensors(), {{kSafetensorsChecksumKey, "{}"}}),
                    Catch::Contains("'tapegrad.crc32c' is reserved"));
}

TEST_CASE("a malformed or incomplete checksum entry is a runtime_error", "[checkpoint][checksum][errors]") {
  auto with_sums = [](const std::string& sums) {
    const std::string header = R"({"__metadata__":{"tapegrad.crc32c":")" + sums +
                               R"("},"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
    const std::uint64_t zero = 0;
    return safetensors_file(header, &zero, 8);
  };
  CHECK_THAT(safetensors_parse_error(with_sums("not json")), Catch::Contains("is not valid JSON"));
  CHECK_THAT(safetensors_parse_error(with_sums("{}")), Catch::Contains("tensor 'x' has no checksum"));
  const std::uint64_t zero = 0;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(&zero, 8));
  CHECK(safetensors_parse_error(with_sums(std::string(R"({\"x\":\")") + hex + R"(\"})")).empty());
  CHECK_THAT(safetensors_parse_error(with_sums(std::string(R"({\"x\":\")") + hex + R"(\",\"y\":\"0\"})")),
             Catch::Contains("names a tensor 'y' the file does not hold"));
}
