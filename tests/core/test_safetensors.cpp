// core/safetensors.h: a header whose entry sizes multiply past 64 bits is a corrupt file,
// even when another size is zero (docs/errors.md, "Checkpoints").
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/core/safetensors.h>
#include "safetensors_bytes_support.h"
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

TEST_CASE("reliability: a checkpoint entry whose sizes overflow beside a zero is a corrupt file",
          "[errors][reliability]") {
  // [0, 2^62, 2^62] has no elements, so the data-size bound never applied to the others
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})";
  const std::vector<std::uint8_t> b = tapegrad::test::safetensors_file(header);
  CHECK_THAT(thrown<std::runtime_error>([&] { parse_safetensors(b.data(), b.size()); }),
             Contains("safetensors") && Contains("'w'") && Contains("64-bit"));
}
