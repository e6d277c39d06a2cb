// torch.save files written by PyTorch 1.13 (tests/fixtures/torch/make_fixtures.py) load into
// models::MLP / models::CNN and give PyTorch's eval-mode outputs; the load semantics
// (dtype casts, num_batches_tracked, prefixes, renames, key-structure reports) on real files.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include <tapegrad/core/autograd.h>
#include <tapegrad/io/torch_archive.h>
#include <tapegrad/io/torch_load.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/models/mlp.h>

#include "io/torch_test_support.h"
#include "temp_dir_support.h"
#include <tapegrad/layers/checkpoint.h>

using namespace tapegrad;
using Catch::Contains;
using io_test::fixture;

namespace {

const nlohmann::json& expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(fixture("expected.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

std::shared_ptr<models::MLP> mlp(Dtype dtype = Dtype::Float32) {
  models::MLPOptions o;
  o.norm = models::Norm::Batch;
  o.dtype = dtype;
  return std::make_shared<models::MLP>(std::vector<std::int64_t>{4, 8, 3}, o);
}

std::shared_ptr<models::CNN> cnn() {
  models::CNNOptions o;
  o.in_channels = 1;
  o.height = o.width = 8;
  o.channels = {4, 6};
  o.hidden = 10;
  o.num_classes = 3;
  return std::make_shared<models::CNN>(o);
}

// The model's eval-mode output on the case's input against PyTorch's, elementwise.
void check_output(layers::Module& m, const std::string& name, Dtype dtype, double tol) {
  const auto& c = expected().at(name);
  std::vector<double> in;
  for (auto& row : c.at("input"))
    if (row.is_array()) for (auto& v : row) in.push_back(v.get<double>());
    else in.push_back(row.get<double>());
  const Shape shape = c.at("shape").get<Shape>();
  m.eval();
  NoGradGuard ng;
  const Tensor y = m(Tensor::from_vector(in, shape, dtype));
  std::vector<double> want;
  for (auto& row : c.at("output")) for (auto& v : row) want.push_back(v.get<double>());
  const std::vector<double> got = y.to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(name << " output " << i);
    CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

std::vector<double> values(const layers::Module& m, const std::string& key) { return m.state_dict().at(key).to_vector(); }

}  // namespace

TEST_CASE("torch.save: an MLP with BatchNorm (Sequential keys, float32) matches PyTorch's eval output", "[io]") {
  auto m = mlp();
  const layers::LoadResult r = io::load(*m, fixture("mlp_seq.pt"));
  CHECK(r.ok());
  CHECK(r.loaded == 9);
  CHECK(r.converted.empty());
  CHECK(m->state_dict().at("1.num_batches_tracked").item() == 3);
  check_output(*m, "mlp", Dtype::Float32, 1e-5);
}

TEST_CASE("torch.save: a CNN with BatchNorm2d / BatchNorm1d matches PyTorch's eval output", "[io]") {
  auto m = cnn();
  const layers::LoadResult r = io::load(*m, fixture("cnn.pt"));
  CHECK(r.ok());
  CHECK(r.loaded == m->state_dict().size());
  check_output(*m, "cnn", Dtype::Float32, 1e-5);
}

TEST_CASE("torch.save: float64 files load into float64 models exactly and into float32 models with a report", "[io]") {
  auto m64 = mlp(Dtype::Float64);
  CHECK(io::load(*m64, fixture("mlp_f64.pt")).converted.empty());
  check_output(*m64, "mlp_f64", Dtype::Float64, 1e-6);

  auto m32 = mlp();
  const layers::LoadResult r = io::load(*m32, fixture("mlp_f64.pt"));  // strict: casts and says so
  CHECK(r.ok());
  REQUIRE(r.converted.size() == 8);  // every floating tensor; num_batches_tracked stays int64
  CHECK(r.converted.front() == "0.weight: float64 -> float32");
  CHECK_THAT(r.report(), Contains("converted 1.running_var: float64 -> float32"));
  check_output(*m32, "mlp", Dtype::Float32, 1e-5);
}

TEST_CASE("torch.save: float16 / bfloat16 convert to float32 only when asked", "[io]") {
  auto m = mlp();
  const auto before = values(*m, "0.weight");
  CHECK_THROWS_WITH(io::load(*m, fixture("mlp_f16.pt")),
                    Contains("tensor '0.weight' is float16") && Contains("half_to_float32"));
  CHECK(values(*m, "0.weight") == before);  // nothing loaded

  io::LoadOptions o;
  o.half_to_float32 = true;
  const layers::LoadResult r = io::load(*m, fixture("mlp_f16.pt"), o);
  REQUIRE(r.converted.size() == 8);
  CHECK(r.converted.front() == "0.weight: float16 -> float32 (in the file)");
  check_output(*m, "mlp_f16", Dtype::Float32, 1e-5);

  // bfloat16 keeps 8 significant bits: within 2^-8 relative of the float32 weights
  auto ref = mlp();
  io::load(*ref, fixture("mlp_seq.pt"));
  auto b = mlp();
  io::load(*b, fixture("mlp_bf16.pt"), o);
  for (const auto& key : {"0.weight", "1.running_var", "3.bias"}) {
    const auto got = values(*b, key), want = values(*ref, key);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(key << "[" << i << "]");
      CHECK(std::abs(got[i] - want[i]) <= std::abs(want[i]) * 0x1p-8);
      CHECK(got[i] != 0.0);
    }
  }
}

TEST_CASE("torch.save: named children vs Sequential indices are described, and a rename map loads them", "[io]") {
  auto m = mlp();
  const auto before = values(*m, "0.weight");
  const std::string msg = [&] {
    try {
      io::load(*m, fixture("mlp_named.pt"));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  CHECK_THAT(msg, Contains("mlp_named.pt") && Contains("torch.save"));
  CHECK_THAT(msg, Contains("the file's keys use named children fc1, bn1, fc2; the model's are Sequential indices 0, 1, 3"));
  CHECK_THAT(msg, Contains("rename fc1=0, bn1=1, fc2=3"));
  CHECK(values(*m, "0.weight") == before);

  io::LoadOptions o;
  o.renames = {{"fc1", "0"}, {"bn1", "1"}, {"fc2", "3"}};
  CHECK(io::load(*m, fixture("mlp_named.pt"), o).ok());
  check_output(*m, "mlp", Dtype::Float32, 1e-5);
}

TEST_CASE("torch.save: DataParallel's module. prefix is named and stripped", "[io]") {
  auto m = mlp();
  CHECK_THROWS_WITH(io::load(*m, fixture("mlp_dp.pt")),
                    Contains("every key in the file starts with 'module.' (DataParallel / DistributedDataParallel)") &&
                        Contains("--strip-prefix module."));
  io::LoadOptions o;
  o.strip_prefixes = {"module."};
  const auto rr = io::read_checkpoint(fixture("mlp_dp.pt"), o);
  CHECK(rr.notes == std::vector<std::string>{"stripped 'module.' from 9 keys"});
  CHECK(io::load(*m, fixture("mlp_dp.pt"), o).ok());
  check_output(*m, "mlp", Dtype::Float32, 1e-5);
}

TEST_CASE("io::load reads either format through one archive: a tapegrad file with extras, value checks, key changes",
          "[io]") {
  auto m = mlp();
  REQUIRE(io::load(*m, fixture("mlp_dp.pt"), io::LoadOptions{.strip_prefixes = {"module."}}).ok());
  const std::vector<double> w = values(*m, "0.weight");
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  layers::save(*m, path, layers::SaveOptions{.extra_tensors = {{"scale", Tensor::ones({2})}}, .metadata = {}});
  auto n = mlp();
  const layers::LoadResult r = io::load(*n, path);  // the "extra/" tensors are not module state
  CHECK(r.ok());
  CHECK(r.loaded == m->state_dict().size());
  CHECK(values(*n, "0.weight") == w);
  const io::ReadResult rr = io::read_checkpoint(path);
  CHECK_FALSE(rr.tensors.contains("extra/scale"));
  CHECK(io::read_archive(path).extras().size() == 1);
  // the same LoadOptions as every load: value checks reach io::load
  {
    NoGradGuard ng;
    Tensor(m->state_dict().at("1.running_var")).fill_(-1.0);
  }
  layers::save(*m, path);
  CHECK_THROWS_WITH(io::load(*n, path), Contains("loading '" + path + "' (safetensors)") &&
                                            Contains("1.running_var: expected values >= 0 (a variance)"));
  CHECK(io::load(*n, path, io::LoadOptions{.check_values = false}).ok());
  CHECK(values(*n, "1.running_var")[0] == -1.0);
}

TEST_CASE("torch.save: a checkpoint without num_batches_tracked loads, the counter filled with 0", "[io]") {
  auto m = mlp();
  {
    NoGradGuard ng;
    Tensor(m->state_dict().at("1.num_batches_tracked")).fill_(5);
  }
  const layers::LoadResult r = io::load(*m, fixture("mlp_old_bn.pt"));
  CHECK(r.ok());
  REQUIRE(r.filled.size() == 1);
  CHECK_THAT(r.filled[0], Contains("1.num_batches_tracked = 0") && Contains("before PyTorch 0.4.1"));
  CHECK(m->state_dict().at("1.num_batches_tracked").item() == 0);
  check_output(*m, "mlp", Dtype::Float32, 1e-5);
}

TEST_CASE("torch.save: views and shared storages come back as PyTorch saved them", "[io]") {
  const layers::StateDict d = io::read_torch_file(fixture("views.pt"));
  REQUIRE(d.keys() == std::vector<std::string>{"a", "a_t", "row1", "col", "n", "s"});
  for (const auto& [k, t] : d) {
    INFO(k);
    const auto& want = expected().at("views").at(k);
    CHECK(t.shape() == want.at("shape").get<Shape>());
    CHECK(t.to_vector() == want.at("values").get<std::vector<double>>());
  }
  CHECK(d.at("a").to_vector() == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
  CHECK(d.at("a_t").to_vector() == std::vector<double>{0, 1.5, 0.5, 2, 1, 2.5});  // the transpose, copied
  CHECK(d.at("col").to_vector() == std::vector<double>{0.5, 2});
  CHECK(d.at("row1").shares_storage_with(d.at("a")));  // a contiguous view at offset 3 aliases, like PyTorch
  CHECK(d.at("n").dtype() == Dtype::Int64);
  CHECK(d.at("s").dtype() == Dtype::Float64);
  CHECK(d.at("s").shape().empty());
}

TEST_CASE("torch.save: a training checkpoint's state dict is picked with entry", "[io]") {
  CHECK_THROWS_WITH(io::read_torch_file(fixture("checkpoint.pt")),
                    Contains("key 'epoch' holds an int, not a tensor") && Contains("keys: epoch, state_dict") &&
                        Contains("under state_dict"));
  io::TorchReadOptions o;
  o.entry = "state_dict";
  auto m = mlp();
  CHECK(m->load_state_dict(io::read_torch_file(fixture("checkpoint.pt"), o)).ok());
  check_output(*m, "mlp", Dtype::Float32, 1e-5);
  o.entry = "model";
  CHECK_THROWS_WITH(io::read_torch_file(fixture("checkpoint.pt"), o), Contains("has no key 'model'"));
}

TEST_CASE("torch.save: the in-memory parser and the file reader agree", "[io]") {
  const auto bytes = io_test::read_bytes(fixture("cnn.pt"));
  const layers::StateDict a = io::parse_torch_archive(bytes.data(), bytes.size());
  const layers::StateDict b = io::read_torch_file(fixture("cnn.pt"));
  REQUIRE(a.keys() == b.keys());
  for (const auto& [k, t] : a) CHECK(t.to_vector() == b.at(k).to_vector());
}
