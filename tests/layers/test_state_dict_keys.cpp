// Key reshaping (strip_prefix, rename_keys), key-structure reports, and the load semantics
// load_state_dict shares between safetensors and torch.save files: floating casts and the
// num_batches_tracked fill, both reported, and atomicity; a strict load names every missing,
// unexpected and mis-shaped key (docs/errors.md, "Checkpoints").
#include <catch2/catch.hpp>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/layers/state_dict_keys.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Contains;
using tapegrad::test::f32;
using tapegrad::test::same_state;
using tapegrad::test::state_snapshot;
using tapegrad::test::thrown;

namespace {

StateDict dict_of(const std::vector<std::string>& keys) {
  StateDict d;
  for (std::size_t i = 0; i < keys.size(); ++i) d.insert(keys[i], Tensor::full({1}, static_cast<double>(i)));
  return d;
}

std::shared_ptr<Sequential> linear_bn() {
  auto s = std::make_shared<Sequential>();
  s->push_back(std::make_shared<Linear>(2, 3));
  s->push_back(std::make_shared<BatchNorm1d>(3));
  return s;
}

// Linear(2, 3) -> BatchNorm1d(3), seeded.
std::shared_ptr<Sequential> small_net() {
  Generator gen(7);
  return std::make_shared<Sequential>(
      std::initializer_list<ModulePtr>{std::make_shared<Linear>(2, 3, true, Dtype::Float32, gen),
                                       std::make_shared<BatchNorm1d>(3)});
}

}  // namespace

TEST_CASE("strip_prefix is consume_prefix_in_state_dict_if_present", "[layers][state_dict]") {
  const StateDict d = strip_prefix(dict_of({"module.0.weight", "module.0.bias", "other"}), "module.");
  CHECK(d.keys() == std::vector<std::string>{"0.weight", "0.bias", "other"});
  CHECK(d.at("0.bias").item() == 1);
  CHECK_THROWS_WITH(strip_prefix(dict_of({"module.a", "a"}), "module."),
                    Contains("keys 'module.a' and 'a' both become 'a'"));
  CHECK_THROWS_AS(strip_prefix(dict_of({"a"}), ""), std::invalid_argument);
}

TEST_CASE("rename_keys renames keys and leading key paths, refusing typos and collisions", "[layers][state_dict]") {
  const StateDict d = rename_keys(dict_of({"fc1.weight", "fc1.bias", "fc10.weight", "bn.running_mean"}),
                                  {{"fc1", "0"}, {"fc10", "2"}, {"bn.running_mean", "1.running_mean"}});
  CHECK(d.keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "1.running_mean"});
  CHECK(rename_keys(dict_of({"model.fc.w"}), {{"model", ""}}).keys() == std::vector<std::string>{"fc.w"});
  CHECK_THROWS_WITH(rename_keys(dict_of({"fc1.weight"}), {{"fc2", "0"}}), Contains("'fc2=0' matches no key"));
  CHECK_THROWS_WITH(rename_keys(dict_of({"a.w", "b.w"}), {{"a", "b"}}), Contains("keys 'a.w' and 'b.w' both become 'b.w'"));
  CHECK(parse_key_rename("fc1=0").from == "fc1");
  CHECK(parse_key_rename("x=").to.empty());
  CHECK_THROWS_WITH(parse_key_rename("fc1"), Contains("expected OLD=NEW") && Contains("'fc1'"));
  CHECK_THROWS_AS(parse_key_rename("=0"), std::invalid_argument);
}

TEST_CASE("describe_key_structure names prefixes and named-vs-indexed layouts", "[layers][state_dict]") {
  const std::vector<std::string> model{"0.weight", "0.bias", "2.weight", "2.bias"};
  CHECK(describe_key_structure({"module.0.weight", "module.0.bias"}, model) ==
        "every key in the file starts with 'module.' (DataParallel / DistributedDataParallel) and no key of the model "
        "does; strip it: strip_prefix(dict, \"module.\") / --strip-prefix module.");
  CHECK_THAT(describe_key_structure({"0.weight"}, {"net.0.weight"}), Contains("every key of the model starts with 'net.'"));
  CHECK(describe_key_structure({"fc.weight"}, model).find("starts with") == std::string::npos);  // no prefix claim
  CHECK(describe_key_structure({"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}, model) ==
        "the file's keys use named children fc1, fc2; the model's are Sequential indices 0, 2 (in order they hold the "
        "same names; rename fc1=0, fc2=2: rename_keys / --rename)");
  // different leaf names: described, no rename proposed
  CHECK(describe_key_structure({"fc1.weight", "fc2.weight"}, model) ==
        "the file's keys use named children fc1, fc2; the model's are Sequential indices 0, 2");
  CHECK(describe_key_structure({"0.weight"}, model).empty());  // same layout, keys missing
}

TEST_CASE("load_state_dict: strict casts floating dtypes and reports it; int <-> float stays a mismatch",
          "[layers][state_dict]") {
  auto net = linear_bn();
  StateDict d;
  for (auto& [k, t] : net->state_dict())
    d.insert(k, is_floating(t.dtype()) ? Tensor::full(t.shape(), 0.25, Dtype::Float64) : t.clone());
  const LoadResult r = net->load_state_dict(d);
  CHECK(r.ok());
  CHECK(r.loaded == 7);
  CHECK(r.converted.size() == 6);
  CHECK(r.converted[0] == "0.weight: float64 -> float32");
  CHECK(net->state_dict().at("0.weight").dtype() == Dtype::Float32);
  CHECK(net->state_dict().at("1.running_var").to_vector() == std::vector<double>{0.25, 0.25, 0.25});
  CHECK_THAT(r.report(), Contains("loaded 7 tensors") && Contains("converted 1.bias: float64 -> float32"));

  d.insert("1.num_batches_tracked", Tensor::zeros({}, Dtype::Float64));
  CHECK_THROWS_WITH(net->load_state_dict(d), Contains("1.num_batches_tracked: expected [] int64, got [] float64"));
}

TEST_CASE("load_state_dict: an absent num_batches_tracked beside running stats is 0, without them it is missing",
          "[layers][state_dict]") {
  auto net = linear_bn();
  {
    NoGradGuard ng;
    Tensor(net->state_dict().at("1.num_batches_tracked")).fill_(9);
  }
  StateDict d = net->state_dict();
  d.erase("1.num_batches_tracked");
  const LoadResult r = net->load_state_dict(d);
  CHECK(r.ok());
  REQUIRE(r.filled.size() == 1);
  CHECK_THAT(r.filled[0], Contains("1.num_batches_tracked = 0"));
  CHECK(net->state_dict().at("1.num_batches_tracked").item() == 0);

  // no running stats either: the file holds parameters only, all three buffers are missing
  {
    NoGradGuard ng;
    Tensor(net->state_dict().at("1.num_batches_tracked")).fill_(9);
  }
  d.erase("1.running_mean");
  CHECK_THROWS_WITH(net->load_state_dict(d), Contains("Missing keys: 1.running_mean, 1.num_batches_tracked"));
  CHECK(net->state_dict().at("1.num_batches_tracked").item() == 9);  // atomic: nothing written
}

TEST_CASE("load_state_dict: a structural mismatch is summarised and the key lists cut", "[layers][state_dict]") {
  auto net = std::make_shared<Sequential>();
  for (int i = 0; i < 12; ++i) net->push_back(std::make_shared<Linear>(2, 2));
  StateDict d;
  for (auto& [k, t] : net->state_dict()) d.insert("layer" + k, t.clone());
  const std::string msg = [&] {
    try {
      net->load_state_dict(d);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK_THAT(msg, Contains("Key structure: the file's keys use named children layer0, layer1"));
  CHECK_THAT(msg, Contains("the model's are Sequential indices 0, 1, 2"));
  CHECK_THAT(msg, Contains("rename layer0=0, layer1=1"));
  CHECK_THAT(msg, Contains("... (24 in all)"));
  const LoadResult r = net->load_state_dict(d, false);
  CHECK(r.missing_keys.size() == 24);
  CHECK_FALSE(r.structure.empty());
}

TEST_CASE("errors: strict load_state_dict lists missing, unexpected and mis-shaped keys and loads nothing",
          "[errors]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  auto net = small_net();
  const StateDict before = state_snapshot(*net);
  // A checkpoint from another run: every value different.
  auto other = small_net();
  {
    NoGradGuard ng;
    for (auto& [k, t] : other->state_dict())
      if (is_floating(t.dtype())) Tensor(t).add_(Tensor::full(t.shape(), 0.5, t.dtype()));
  }

  SECTION("missing buffers (a checkpoint saved from named_parameters only)") {
    StateDict ck;
    for (auto& [k, t] : other->named_parameters()) ck.insert(k, t);
    CHECK_THAT(thrown<std::invalid_argument>([&] { net->load_state_dict(ck); }),
               Contains("nothing was loaded") &&
                   Contains("Missing keys: 1.running_mean, 1.running_var, 1.num_batches_tracked"));
    CHECK(same_state(state_snapshot(*net), before));
    // Non-strict loads the parameters and reports the buffers.
    LoadResult r = net->load_state_dict(ck, false);
    CHECK(r.missing_keys == std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"});
    CHECK(net->state_dict().at("0.weight").to_vector() == other->state_dict().at("0.weight").to_vector());
    CHECK(net->state_dict().at("1.running_var").to_vector() == std::vector<double>{1, 1, 1});
  }
  SECTION("unexpected key") {
    StateDict ck = other->state_dict();
    ck.insert("2.weight", f32({3}));
    CHECK_THAT(thrown<std::invalid_argument>([&] { net->load_state_dict(ck); }),
               Contains("Unexpected keys: 2.weight"));
    CHECK(same_state(state_snapshot(*net), before));
  }
  SECTION("mis-shaped and mis-typed keys name expected and actual") {
    StateDict ck = other->state_dict();
    ck.insert("0.weight", f32({3, 3}));
    ck.insert("1.bias", Tensor::zeros({3}, Dtype::Float64));  // float64 into float32: cast, not a mismatch
    ck.insert("1.num_batches_tracked", Tensor::zeros({}, Dtype::Float32));
    const std::string msg = thrown<std::invalid_argument>([&] { net->load_state_dict(ck); });
    CHECK_THAT(msg, Contains("0.weight: expected [3, 2] float32, got [3, 3] float32"));
    CHECK_THAT(msg, !Contains("1.bias"));
    CHECK_THAT(msg, Contains("1.num_batches_tracked: expected [] int64, got [] float32"));
    CHECK(same_state(state_snapshot(*net), before));
  }
  SECTION("everything wrong at once is reported at once") {
    StateDict ck;
    ck.insert("0.weight", f32({2, 2}));
    ck.insert("extra", f32({1}));
    const std::string msg = thrown<std::invalid_argument>([&] { net->load_state_dict(ck); });
    CHECK_THAT(msg, Contains("Missing keys: 0.bias") && Contains("Unexpected keys: extra") &&
                        Contains("0.weight: expected [3, 2] float32, got [2, 2] float32"));
    CHECK(same_state(state_snapshot(*net), before));
  }
}
