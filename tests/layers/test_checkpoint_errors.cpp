// Corrupt checkpoint files and checkpoints that do not fit the module (docs/errors.md,
// "Checkpoints" and "Files"): std::runtime_error naming the path, the problem and its
// byte offset for a corrupt file; std::invalid_argument listing every key problem for a
// file that does not fit; the module is unchanged in both cases.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/core/core.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include "safetensors_bytes_support.h"
#include "test_errors_support.h"
#include "temp_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Matchers::Contains;
using tapegrad::test::safetensors_file;
using tapegrad::test::thrown;

namespace {
using Bytes = std::vector<std::uint8_t>;

std::string parse_error(const Bytes& b) {
  return thrown<std::runtime_error>([&] { parse_safetensors(b.data(), b.size()); });
}

using tapegrad::test::TempDir;

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

std::shared_ptr<Sequential> net(std::uint64_t seed, std::int64_t hidden = 3) {
  Generator gen(seed);
  return std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Linear>(2, hidden, true, Dtype::Float32, gen), std::make_shared<BatchNorm1d>(hidden)});
}
std::vector<double> all_values(const Module& m) {
  std::vector<double> v;
  for (auto& [k, t] : m.state_dict())
    for (double x : t.to_vector()) v.push_back(x);
  return v;
}
}  // namespace

TEST_CASE("errors: a corrupt safetensors buffer names the problem and the byte offset", "[errors]") {
  const std::string f32x2 = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const Bytes ok = safetensors_file(f32x2, Bytes(8, 0));
  CHECK(parse_safetensors(ok.data(), ok.size()).tensors.size() == 1);

  CHECK_THAT(parse_error(Bytes{1, 2, 3}), Contains("3 bytes") && Contains("8-byte header length") &&
                                             Contains("byte offset 0"));
  Bytes long_header = ok;
  long_header[0] = 0xFF;  // header length 0xFF.. > file
  CHECK_THAT(parse_error(long_header), Contains("runs past the end of the file") && Contains("byte offset 0"));
  CHECK_THAT(parse_error(safetensors_file("[1,2]   ")), Contains("does not start with '{'") && Contains("byte offset 8"));
  CHECK_THAT(parse_error(safetensors_file(R"({"w":{"dtype":"F32",)")), Contains("not valid JSON"));
  // Found by fuzz_safetensors: a number that overflows a double made the JSON library throw
  // an exception that was not a std::runtime_error (it ended the program).
  CHECK_THAT(parse_error(safetensors_file(R"({"x":1e309})")), Contains("not valid JSON") && Contains("1e309"));
  CHECK_THAT(parse_error(safetensors_file(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", Bytes(4, 0))),
             Contains("unknown dtype 'F16'") && Contains("F32, F64 or I64"));
  CHECK_THAT(parse_error(safetensors_file(f32x2, Bytes(4, 0))), Contains("'w'") && Contains("[0, 8]"));
  CHECK_THAT(parse_error(safetensors_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Bytes(8, 0))),
             Contains("[3]") && Contains("needs 12"));
  CHECK_THAT(parse_error(safetensors_file(f32x2, Bytes(12, 0))),
             Contains("4 bytes after the last tensor") && Contains("byte offset"));
  CHECK_THAT(parse_error(safetensors_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", Bytes(8, 0))),
             Contains("not a non-negative integer"));
}

TEST_CASE("errors: loading a corrupt or missing checkpoint file names the path and changes nothing", "[errors]") {
  TempDir dir;
  auto src = net(1);
  const std::string path = dir.file("ck.safetensors");
  save(*src, path);
  const Bytes good = read_bytes(path);
  REQUIRE(good.size() > 100);

  auto dst = net(2);
  const std::vector<double> before = all_values(*dst);

  write_bytes(dir.file("cut.safetensors"), Bytes(good.begin(), good.begin() + good.size() / 2));
  CHECK_THAT(thrown<std::runtime_error>([&] { load(*dst, dir.file("cut.safetensors")); }),
             Contains("cut.safetensors") && Contains("byte offset"));
  Bytes flipped = good;
  flipped[8] = '[';  // the header's opening brace
  write_bytes(dir.file("flipped.safetensors"), flipped);
  CHECK_THAT(thrown<std::runtime_error>([&] { load(*dst, dir.file("flipped.safetensors")); }),
             Contains("flipped.safetensors") && Contains("byte offset 8"));
  CHECK_THAT(thrown<std::runtime_error>([&] { load(*dst, dir.file("absent.safetensors")); }),
             Contains("absent.safetensors") && Contains("cannot open"));
  CHECK(all_values(*dst) == before);

  // The intact file loads and reproduces the source exactly.
  load(*dst, path);
  CHECK(all_values(*dst) == all_values(*src));
}

TEST_CASE("errors: a checkpoint without buffers or with other shapes lists every key problem", "[errors]") {
  TempDir dir;
  auto src = net(1);
  const std::string params_only = dir.file("params.safetensors");
  save(*src, params_only, /*include_buffers=*/false);

  auto dst = net(2);
  const std::vector<double> before = all_values(*dst);
  const std::string msg = thrown<std::invalid_argument>([&] { load(*dst, params_only); });
  CHECK_THAT(msg, Contains("params.safetensors") &&
                      Contains("Missing keys: 1.running_mean, 1.running_var, 1.num_batches_tracked") &&
                      Contains("saved without buffers"));
  CHECK(all_values(*dst) == before);

  auto wider = net(3, 4);  // Linear(2, 4), BatchNorm1d(4)
  const std::string wide_msg = thrown<std::invalid_argument>([&] { load(*wider, dir.file("params.safetensors")); });
  CHECK_THAT(wide_msg, Contains("0.weight: expected [4, 2] float32, got [3, 2] float32") &&
                           Contains("1.bias: expected [4] float32, got [3] float32"));
}
