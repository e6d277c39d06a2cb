// layers::save / load_checkpoint with extras: user tensors and metadata beside a module's
// state, the file layout, plain load() ignoring them, a Standardizer carried through a
// file, and the refusals.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>

#include "temp_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
namespace fs = std::filesystem;
using V = std::vector<double>;

namespace {
using ExtrasDir = tapegrad::test::TempDir;

std::shared_ptr<Sequential> net(std::uint64_t seed) {
  Generator g(seed);
  auto s = std::make_shared<Sequential>();
  s->push_back(std::make_shared<Linear>(LinearOptions(3, 2), g));
  s->push_back(std::make_shared<BatchNorm1d>(2));
  return s;
}
}  // namespace

TEST_CASE("save with extras: tensors and metadata come back beside the module's state", "[layers][checkpoint]") {
  ExtrasDir dir;
  auto a = net(1);
  const Tensor mean = Tensor::from_vector({0.25, -1}, {2}, Dtype::Float64);
  const Tensor counts = Tensor::from_int64({3, 4, 5}, {3});
  save(*a, dir.file("m.safetensors"),
       {.extra_tensors = {{"standardizer.mean", mean}, {"counts", counts}},
        .metadata = {{"classes", "cat,dog"}, {"note", "trained on 600 rows"}}});

  // the file: module keys as before, extras under "extra/", user metadata beside ours
  const SafetensorsContent c = load_safetensors(dir.file("m.safetensors"));
  REQUIRE(c.find("0.weight"));
  REQUIRE(c.find("1.running_mean"));
  REQUIRE(c.find("extra/standardizer.mean"));
  CHECK(c.find("extra/counts")->to_vector() == V{3, 4, 5});
  CHECK(c.metadata.at("format") == kCheckpointFormat);
  CHECK(c.metadata.at("classes") == "cat,dog");

  auto b = net(2);
  const LoadedCheckpoint ck = load_checkpoint(*b, dir.file("m.safetensors"));
  CHECK(ck.result.ok());
  CHECK(b->state_dict().at("0.weight").to_vector() == a->state_dict().at("0.weight").to_vector());
  REQUIRE(ck.extras.tensors.size() == 2);
  CHECK(ck.extras.tensors[0].first == "standardizer.mean");
  CHECK(ck.extras.find("standardizer.mean")->dtype() == Dtype::Float64);
  CHECK(ck.extras.find("standardizer.mean")->to_vector() == V{0.25, -1});
  CHECK(ck.extras.find("counts")->dtype() == Dtype::Int64);
  CHECK(ck.extras.find("nope") == nullptr);
  CHECK(ck.extras.metadata == std::map<std::string, std::string>{{"classes", "cat,dog"}, {"note", "trained on 600 rows"}});
  // the extras alone, and a plain strict load that does not see them as unexpected keys
  CHECK(load_checkpoint_extras(dir.file("m.safetensors")).find("counts"));
  auto c2 = net(3);
  CHECK(load(*c2, dir.file("m.safetensors")).ok());
  CHECK(load_state_dict_file(dir.file("m.safetensors")).size() == a->state_dict().size());
  // a file without extras gives empty ones
  save(*a, dir.file("plain.safetensors"));
  const LoadedCheckpoint p = load_checkpoint(*c2, dir.file("plain.safetensors"));
  CHECK(p.extras.tensors.empty());
  CHECK(p.extras.metadata.empty());
}

TEST_CASE("a Standardizer travels with the model through a checkpoint", "[layers][checkpoint]") {
  ExtrasDir dir;
  const Tensor X = Tensor::from_vector({1, 2, 3, 4, 5, 9}, {3, 3 - 1});
  const data::Standardizer s = data::Standardizer::fit(X);
  std::vector<std::pair<std::string, Tensor>> extra;
  for (auto& [k, t] : s.state_dict()) extra.emplace_back("standardizer." + k, t);
  Generator g(0);
  Linear model(LinearOptions(2, 1), g);
  save(model, dir.file("s.safetensors"), {.extra_tensors = extra});

  Linear fresh(LinearOptions(2, 1), g);
  const LoadedCheckpoint ck = load_checkpoint(fresh, dir.file("s.safetensors"));
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto& [k, t] : ck.extras.tensors)
    if (k.rfind("standardizer.", 0) == 0) state.emplace_back(k.substr(13), t);
  const data::Standardizer r = data::Standardizer::from_state_dict(state);
  CHECK(r.mean() == s.mean());
  CHECK(r.stddev() == s.stddev());
  CHECK(fresh(r.transform(X)).to_vector() == model(s.transform(X)).to_vector());
}

TEST_CASE("save with extras refuses bad names and reserved keys, leaving the old file", "[layers][checkpoint]") {
  ExtrasDir dir;
  auto a = net(1);
  const std::string path = dir.file("m.safetensors");
  save(*a, path, {.metadata = {{"run", "first"}}});
  const Tensor t = Tensor::zeros({2});
  CHECK_THROWS_WITH(save(*a, path, {.extra_tensors = {{"", t}}}), Catch::Contains("empty name"));
  CHECK_THROWS_WITH(save(*a, path, {.extra_tensors = {{"x", t}, {"x", t}}}), Catch::Contains("'x' given twice"));
  CHECK_THROWS_WITH(save(*a, path, {.extra_tensors = {{"u", Tensor()}}}), Catch::Contains("'u' is undefined"));
  CHECK_THROWS_WITH(save(*a, path, {.metadata = {{"format", "mine"}}}), Catch::Contains("'format' is reserved"));
  CHECK(load_checkpoint_extras(path).metadata.at("run") == "first");
  // include_buffers = false still works with options
  save(*a, path, {.include_buffers = false});
  CHECK_FALSE(load_safetensors(path).find("1.running_mean"));
}
