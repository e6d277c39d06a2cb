// tapegrad_convert onnx's function: a train_fashion_mnist checkpoint rebuilt from its
// metadata and written as ONNX; the refusals. The converted models' outputs are compared in
// ONNX Runtime and OpenCV DNN by the onnx_engines ctest (fmnist_mlp, fmnist_cnn_fused).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/safetensors.h>
#include "onnx_convert.h"
#include <tapegrad/layers/flatten.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/models/mlp.h>

using namespace tapegrad;

namespace {

std::string temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("tapegrad_onnx_convert_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string write_checkpoint(const std::string& path, const std::map<std::string, std::string>& meta, bool preprocess,
                             std::vector<std::int64_t> sizes = {784, 16, 10}) {
  Generator gen(4);
  models::MLP mlp(sizes, {.norm = models::Norm::Batch, .dropout = 0.2}, gen);
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& [k, v] : mlp.state_dict()) t.emplace_back("model." + k, v);
  if (preprocess) {
    t.emplace_back("preprocess.mean", Tensor::from_vector({0.286}, {1}, Dtype::Float64));
    t.emplace_back("preprocess.std", Tensor::from_vector({0.353}, {1}, Dtype::Float64));
  }
  save_safetensors(path, t, meta);
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

const std::map<std::string, std::string> kMeta{
    {"fmnist.model", "mlp"}, {"fmnist.hidden", "16"}, {"fmnist.norm", "batch"}, {"fmnist.dropout", "0.2"}};

}  // namespace

TEST_CASE("convert_checkpoint_to_onnx exports a train_fashion_mnist checkpoint", "[onnx]") {
  tapegrad::ModeChecksPause pause;  // an untrained BatchNorm net exported on purpose
  const std::string dir = temp_dir();
  const std::string ckpt = write_checkpoint(dir + "/mlp.safetensors", kMeta, true);
  const std::string out = dir + "/mlp.onnx";
  const std::string summary = fmnist::convert_checkpoint_to_onnx(ckpt, out);
  REQUIRE_THAT(summary, Catch::Contains("standardisation folded in") && Catch::Contains("(N, 784) -> output (N, 10)"));
  const std::string bytes = read_file(out);
  for (const char* s : {"preprocess.mean", "fmnist.hidden", "pixels / 255", "0.weight", "Gemm"})
    REQUIRE(bytes.find(s) != std::string::npos);

  fmnist::OnnxConvertOptions o;
  o.fuse_batch_norm = true;
  o.fold_preprocessing = false;
  REQUIRE_THAT(fmnist::convert_checkpoint_to_onnx(ckpt, out, o), Catch::Contains("fused 1 BatchNorm layers"));
  const std::string fused = read_file(out);
  REQUIRE(fused.find("preprocess.mean = 0.286") != std::string::npos);  // the recipe in the metadata
  REQUIRE(fused.find("1.scale") == std::string::npos);                  // no BatchNorm left
  std::filesystem::remove_all(dir);
}

TEST_CASE("convert_checkpoint_to_onnx refuses checkpoints without what it needs", "[onnx][errors]") {
  const std::string dir = temp_dir();
  auto meta = kMeta;
  meta.erase("fmnist.norm");
  const std::string no_arch = write_checkpoint(dir + "/a.safetensors", meta, true);
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(no_arch, dir + "/a.onnx"),
                      Catch::Contains("holds no architecture: metadata key 'fmnist.norm' is missing"));
  const std::string no_pre = write_checkpoint(dir + "/b.safetensors", kMeta, false);
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(no_pre, dir + "/b.onnx"),
                      Catch::Contains("holds no preprocessing") && Catch::Contains("--no-fold-preprocessing"));
  meta = kMeta;
  meta["fmnist.hidden"] = "16,x";
  const std::string bad = write_checkpoint(dir + "/c.safetensors", meta, true);
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(bad, dir + "/c.onnx"),
                      Catch::Contains("fmnist.hidden: expected positive integers separated by commas, got '16,x'"));
  const std::string wrong = write_checkpoint(dir + "/d.safetensors", kMeta, true, {784, 20, 10});
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(wrong, dir + "/d.onnx"), Catch::Contains("0.weight"));
  REQUIRE_FALSE(std::filesystem::exists(dir + "/d.onnx"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("convert_checkpoint_to_onnx parses integer metadata as whole integers naming the key", "[onnx][errors]") {
  const std::string dir = temp_dir();
  models::CNNOptions co;
  co.height = co.width = 28;
  co.channels = {4, 8};
  co.hidden = 16;
  co.groups = 4;
  co.norm = models::ConvNorm::Group;
  Generator gen(5);
  layers::Sequential net{std::make_shared<layers::Unflatten>(1, Shape{1, 28, 28}), std::make_shared<models::CNN>(co, gen)};
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, v] : net.state_dict()) tensors.emplace_back("model." + k, v);
  const std::map<std::string, std::string> good{{"fmnist.model", "cnn"},       {"fmnist.hidden", "16"},
                                                {"fmnist.norm", "group"},      {"fmnist.dropout", "0"},
                                                {"fmnist.cnn.channels", "4,8"}, {"fmnist.cnn.head", "16"},
                                                {"fmnist.cnn.groups", "4"}};
  fmnist::OnnxConvertOptions o;
  o.fold_preprocessing = false;
  save_safetensors(dir + "/good.safetensors", tensors, good);
  REQUIRE_THAT(fmnist::convert_checkpoint_to_onnx(dir + "/good.safetensors", dir + "/good.onnx", o), Catch::Contains("wrote"));
  // "16.9" was read as 16 (a model built from a value the file does not hold); "1e30" and
  // "nan" were cast from double to int64 (undefined), the error showed -9223372036854775808
  const std::vector<std::pair<std::string, std::string>> bad{
      {"fmnist.cnn.head", "16.9"},  {"fmnist.cnn.head", "1e30"},   {"fmnist.cnn.head", "nan"},
      {"fmnist.cnn.head", "-1"},    {"fmnist.cnn.head", " 16"},    {"fmnist.cnn.head", "99999999999999999999"},
      {"fmnist.cnn.groups", "4.0"}, {"fmnist.cnn.groups", "0"},    {"fmnist.cnn.groups", "1e30"},
      {"fmnist.cnn.channels", "4,8.5"}, {"fmnist.cnn.channels", "4,+8"}, {"fmnist.dropout", "nan"}};
  for (const auto& [key, value] : bad) {
    auto meta = good;
    meta[key] = value;
    const std::string ckpt = dir + "/bad.safetensors";
    save_safetensors(ckpt, tensors, meta);
    INFO(key << " = '" << value << "'");
    REQUIRE_THROWS_AS(fmnist::convert_checkpoint_to_onnx(ckpt, dir + "/bad.onnx", o), std::invalid_argument);
    REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(ckpt, dir + "/bad.onnx", o),
                        Catch::Contains(key + ": expected") && Catch::Contains("got '" + value + "'") &&
                            !Catch::Contains("-9223372036854775808"));
    REQUIRE_FALSE(std::filesystem::exists(dir + "/bad.onnx"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("convert_checkpoint_to_onnx refuses an architecture larger than the checkpoint's tensors", "[onnx][errors]") {
  // a 60 KB checkpoint whose metadata declares widths of a billion (an MLP of 10^18 weights)
  const std::string dir = temp_dir();
  auto meta = kMeta;
  meta["fmnist.hidden"] = "1000000000,1000000000";
  const std::string mlp = write_checkpoint(dir + "/wide.safetensors", meta, true);
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(mlp, dir + "/wide.onnx"),
                      Catch::Contains("fmnist.hidden: declares") &&
                          Catch::Contains("parameters, more than the checkpoint's model tensors hold"));
  meta = kMeta;
  meta["fmnist.model"] = "cnn";
  meta["fmnist.cnn.channels"] = "4,3000000000";
  const std::string cnn = write_checkpoint(dir + "/cnn.safetensors", meta, true);
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(cnn, dir + "/cnn.onnx"),
                      Catch::Contains("fmnist.cnn.channels: declares"));
  meta["fmnist.cnn.channels"] = "4,8";
  meta["fmnist.cnn.head"] = "1e300";  // was cast to int64 unchecked
  const std::string head = write_checkpoint(dir + "/head.safetensors", meta, true);
  REQUIRE_THROWS_WITH(fmnist::convert_checkpoint_to_onnx(head, dir + "/head.onnx"),
                      Catch::Contains("fmnist.cnn.head: expected an integer from 0 to"));
  REQUIRE_FALSE(std::filesystem::exists(dir + "/wide.onnx"));
  std::filesystem::remove_all(dir);
}
