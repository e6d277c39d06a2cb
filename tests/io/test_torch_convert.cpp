// convert_torch_to_safetensors (tapegrad_convert torch): the written safetensors file holds the
// same tensors under the (reshaped) keys and loads into the model with layers::load; a
// refused input writes nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/io/torch_archive.h>
#include <tapegrad/io/torch_convert.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/models/mlp.h>

#include "io/torch_test_support.h"

using namespace tapegrad;
using Catch::Contains;
using io_test::fixture;

TEST_CASE("convert: a DataParallel .pt becomes a safetensors file that layers::load reads", "[io]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tapegrad_convert_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "mlp.safetensors").string();
  io::LoadOptions o;
  o.strip_prefixes = {"module."};
  const std::string report = io::convert_torch_to_safetensors(fixture("mlp_dp.pt"), out, o);
  CHECK_THAT(report, Contains("9 tensors") && Contains("stripped 'module.' from 9 keys") && Contains("wrote"));

  const SafetensorsContent c = load_safetensors(out);
  CHECK(c.metadata.at("source_format") == "torch.save");
  const layers::StateDict src = io::read_torch_file(fixture("mlp_seq.pt"));
  REQUIRE(c.tensors.size() == src.size());
  for (const auto& [k, t] : c.tensors) {
    INFO(k);
    CHECK(t.dtype() == src.at(k).dtype());
    CHECK(t.to_vector() == src.at(k).to_vector());
  }
  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  models::MLP m({4, 8, 3}, mo);
  CHECK(layers::load(m, out).ok());

  const std::string refused = (dir / "refused.safetensors").string();
  CHECK_THROWS_WITH(io::convert_torch_to_safetensors(fixture("hostile_global.pt"), refused),
                    Contains("refusing global 'posix.system'"));
  CHECK_FALSE(std::filesystem::exists(refused));
  CHECK_THROWS_AS(io::convert_torch_to_safetensors(out, refused), std::invalid_argument);
  std::filesystem::remove_all(dir);
}

TEST_CASE("convert: tensors aliasing one storage count against max_bytes in the output", "[io][errors]") {
  // 100 keys, each the whole of one 64 KiB storage: a 66 KB file whose safetensors form is 6.5 MB
  io_test::Pickle p;
  p.begin_dict();
  for (int i = 0; i < 100; ++i) p.str("k" + std::to_string(i)).tensor("FloatStorage", "0", 16384, 0, {16384}, {1});
  p.end_dict();
  std::vector<float> data(16384);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  const io_test::Bytes zip = io_test::torch_zip(p.b, {{"0", io_test::le_bytes<float>(data)}});
  const auto dir = std::filesystem::temp_directory_path() / ("tapegrad_alias_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "alias.pt").string(), out = (dir / "alias.safetensors").string();
  io_test::write_bytes(in, zip);
  CHECK_THROWS_WITH(io::convert_torch_to_safetensors(in, out),
                    Contains("the safetensors output would hold 6553600 bytes of tensor data (99 tensors share a "
                             "storage with another") &&
                        Contains("--max-bytes"));
  CHECK_FALSE(std::filesystem::exists(out));
  io::LoadOptions o;
  o.max_bytes = 8'000'000;
  CHECK_THAT(io::convert_torch_to_safetensors(in, out, o), Contains("100 tensors, 6553600 bytes"));
  const SafetensorsContent c = load_safetensors(out);
  REQUIRE(c.tensors.size() == 100);
  CHECK(c.tensors.back().second.to_vector()[16383] == 16383.0);
  std::filesystem::remove_all(dir);
}
