// A file that is not safetensors at all (a CSV, a text file) given as a checkpoint says so
// first, instead of "header length 3631638740200075366 exceeds the limit".
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;
namespace fs = std::filesystem;

TEST_CASE("a CSV given as a checkpoint is 'not a safetensors file'", "[errors][reliability][checkpoint]") {
  char tmpl[] = "/tmp/tapegrad_not_st_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const fs::path dir(tmpl);
  const std::string csv = (dir / "results.csv").string();
  {
    std::ofstream f(csv);
    f << "model,norm,replicas,m,global_batch,lr\nmlp,batch,4,2,8,0.003125\n";
  }
  layers::Linear lin(2, 2);
  const std::string msg = thrown<std::runtime_error>([&] { layers::load(lin, csv); });
  CHECK_THAT(msg, Contains("results.csv") && Contains("safetensors: not a safetensors file"));
  // the reason follows, with the numbers
  CHECK_THAT(msg, Contains("runs past the end of the file") && Contains("byte offset 0"));

  // a short header length whose text is not JSON: also "not a safetensors file"
  std::vector<std::uint8_t> bytes(8 + 16, ' ');
  const std::uint64_t n = 16;
  std::memcpy(bytes.data(), &n, 8);
  const char zip_text[] = "PK\x03\x04 zip file";  // 13 bytes of a zip file's start, then spaces
  std::memcpy(bytes.data() + 8, zip_text, sizeof zip_text - 1);
  CHECK_THAT(thrown<std::runtime_error>([&] { parse_safetensors(bytes.data(), bytes.size()); }),
             Contains("not a safetensors file: header does not start with '{'") && Contains("byte offset 8"));
  fs::remove_all(dir);
}
