// The checkpoint archive (core/archive.h): its own contract, the parts' save_to / load_from,
// the per-layer fix-up hook, the key changes of LoadOptions, the format-1 files written by
// the library before the archive (tests/fixtures/checkpoints, made by make_v1.cpp there) and
// the format-2 training file of today's writer (make_v2.cpp there).
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/archive.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/training_checkpoint.h>

#include "layers/checkpoint_run_support.h"
#include "temp_dir_support.h"

using namespace tapegrad;
using tapegrad::test::TempDir;

namespace {

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::string v1(const std::string& name) { return std::string(TAPEGRAD_TESTS_DIR) + "/fixtures/checkpoints/" + name; }

// A module with a buffer named like BatchNorm's counter that is not a norm layer, and one that
// derives a key older files lack through the hook.
class Counter : public layers::Module {
 public:
  Counter() { register_buffer("num_batches_tracked", Tensor::zeros({}, Dtype::Int64)); }
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Counter"; }
};

class Upgrading : public layers::Module {
 public:
  mutable std::vector<std::string> prefixes;
  Upgrading() { register_buffer("scale", Tensor::ones({2})); }
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Upgrading"; }

 protected:
  void upgrade_state_dict(const std::string& prefix, const layers::StateDict& incoming, layers::StateDict& added,
                          std::vector<std::string>& filled) const override {
    prefixes.push_back(prefix);
    if (const Tensor* old = incoming.find(prefix + "old_scale"); old && !incoming.contains(prefix + "scale")) {
      added.insert(prefix + "scale", *old);
      filled.push_back(prefix + "scale = " + prefix + "old_scale");
    }
  }
};

}  // namespace

TEST_CASE("Archive: tensors in write order, prefixes, extras, metadata, one read of the file", "[checkpoint][archive]") {
  TempDir dir;
  Archive a;
  a.write("model.w", Tensor::from_vector({1.0, 2.0}, {2}, Dtype::Float32));
  a.write_all("optimizer.", {{"step", Tensor::from_int64({3}, {})}, {"m", Tensor::from_vector({0.5}, {1})}});
  a.write("extra/mean", Tensor::from_vector({4.0}, {1}, Dtype::Float64));
  a.write("epoch", Tensor::from_int64({7}, {}));
  a.set_metadata("format", "x");
  a.set_metadata("format", "y");  // replaced
  REQUIRE_THROWS_WITH(a.write("model.w", Tensor::zeros({1})), Catch::Contains("key 'model.w' written twice"));
  REQUIRE_THROWS_WITH(a.write("", Tensor::zeros({1})), Catch::Contains("expected a non-empty key"));
  REQUIRE_THROWS_WITH(a.write("u", Tensor()), Catch::Contains("tensor 'u' is undefined"));
  REQUIRE_THROWS_WITH(a.write("__metadata__", Tensor::zeros({1})), Catch::Contains("'__metadata__' is reserved"));

  const std::string path = dir.file("a.safetensors");
  a.save(path);
  const Archive b = Archive::load(path);
  CHECK(b.source() == path);
  REQUIRE(b.tensors().size() == 5);
  CHECK(b.tensors()[0].first == "model.w");
  CHECK(b.tensors()[4].first == "epoch");
  const auto opt = b.with_prefix("optimizer.");
  REQUIRE(opt.size() == 2);
  CHECK(opt[0].first == "step");
  CHECK(opt[0].second.item() == 3);
  CHECK(opt[1].first == "m");
  const auto top = b.with_prefix("");  // every tensor but the extras
  REQUIRE(top.size() == 4);
  for (const auto& [k, t] : top) CHECK(k.rfind("extra/", 0) != 0);
  REQUIRE(b.extras().size() == 1);
  CHECK(b.extras()[0].first == "mean");
  CHECK(b.extras()[0].second.to_vector() == std::vector<double>{4.0});
  CHECK(b.metadata("format") == "y");
  CHECK(b.metadata("absent", "fallback") == "fallback");
  CHECK_FALSE(b.has_metadata("absent"));
  REQUIRE(b.find("model.w"));
  CHECK(b.find("model.w")->to_vector() == std::vector<double>{1.0, 2.0});
  CHECK(b.find("nope") == nullptr);
  // a file's keys are taken as written: another write of one of them is refused too
  Archive c = Archive::load(path);
  REQUIRE_THROWS_WITH(c.write("epoch", Tensor::zeros({1})), Catch::Contains("key 'epoch' written twice"));
  REQUIRE_THROWS_WITH(Archive::load(dir.file("missing.safetensors")), Catch::Contains("missing.safetensors"));
}

TEST_CASE("Module, Optimizer and LRScheduler save into and load from one archive under their prefixes",
          "[checkpoint][archive]") {
  checkpoint_run::Run r = checkpoint_run::make_run(false, 1);
  checkpoint_run::train_steps(r, 3);
  Archive a;
  r.model->save_to(a, "model.");
  r.opt->save_to(a, "optimizer.");
  r.sched->save_to(a, "scheduler.");
  REQUIRE_THROWS_WITH(r.model->save_to(a, "model."), Catch::Contains("written twice"));
  CHECK(a.with_prefix("model.").size() == r.model->state_dict().size());

  checkpoint_run::Run fresh = checkpoint_run::make_run(false, 9);
  const layers::LoadResult res = fresh.model->load_from(a, {}, "model.");
  CHECK(res.loaded == r.model->state_dict().size());
  fresh.opt->load_from(a, "optimizer.");
  fresh.sched->load_from(a, "scheduler.");
  for (const auto& [k, v] : r.model->state_dict()) {
    INFO(k);
    CHECK(bitwise_equal(v, fresh.model->state_dict().at(k)));
  }
  CHECK(fresh.sched->last_epoch() == r.sched->last_epoch());
  for (const auto& [k, v] : r.opt->state_dict()) {
    INFO(k);
    CHECK(bitwise_equal(v, fresh.opt->state_dict().at(k)));
  }
  // parameters only: the classic "weights without buffers" file
  Archive p;
  r.model->save_to(p, "", false);
  CHECK(p.with_prefix("").size() == r.model->parameters().size());
  CHECK(p.find("1.running_mean") == nullptr);
}

TEST_CASE("format-1 files load and resume exactly; today's writer gives the kept files byte for byte",
          "[checkpoint][archive]") {
  TempDir dir;
  checkpoint_run::Run r = checkpoint_run::make_run(false, 77);  // every value must come from the file
  const std::int64_t epoch =
      optim::load_training_checkpoint(v1("training_v1.safetensors"), *r.model, *r.opt, r.sched.get(), &r.data);
  CHECK(epoch == 5);
  CHECK(r.model->state_dict().at("1.num_batches_tracked").item() == 5);
  CHECK(r.sched->last_epoch() == 5);
  CHECK(r.opt->lr(0) == Approx(0.05));  // StepLR(step 3, gamma 0.5) after 5 epochs: 0.1 * 0.5

  // format 1 kept the extras at the top level; they read back as the extras
  const Archive old = Archive::load(v1("training_v1.safetensors"));
  const auto old_extras = optim::training_checkpoint_extras(old);
  REQUIRE(old_extras.size() == 1);
  CHECK(old_extras[0].first == "preprocess.mean");
  CHECK(old_extras[0].second.to_vector() == std::vector<double>{0.25, -1.5, 3.0, 0.0, 2.0});

  // today's code writes format 2 from the same state: the same tensors and metadata, the
  // extras under "extra/" as in module files, byte for byte the kept format-2 file
  optim::CheckpointExtras extras;
  extras.tensors = old_extras;
  extras.metadata = {{"note", old.metadata("note")}};
  const std::string again = dir.file("training_again.safetensors");
  optim::save_training_checkpoint(again, *r.model, *r.opt, epoch, r.sched.get(), &r.data, &extras);
  CHECK(bytes_of(again) == bytes_of(v1("training_v2.safetensors")));
  const Archive now = Archive::load(again);
  REQUIRE(now.tensors().size() == old.tensors().size());
  for (std::size_t i = 0; i < old.tensors().size(); ++i) {
    const auto& [k, t] = old.tensors()[i];
    INFO(k);
    CHECK(now.tensors()[i].first == (k == "preprocess.mean" ? "extra/preprocess.mean" : k));
    CHECK(bitwise_equal(now.tensors()[i].second, t));
  }
  for (const auto& [k, v] : old.metadata()) {
    INFO(k);
    CHECK(now.metadata(k) == (k == "format_version" ? std::string("2") : v));
  }
  CHECK(now.metadata().size() == old.metadata().size());
  REQUIRE(optim::training_checkpoint_extras(now).size() == 1);
  CHECK(bitwise_equal(optim::training_checkpoint_extras(now)[0].second, old_extras[0].second));

  // the module checkpoint of the same run: the same tensors, its extras and metadata
  checkpoint_run::Run m = checkpoint_run::make_run(false, 78);
  const layers::LoadedCheckpoint ck = layers::load_checkpoint(*m.model, v1("model_v1.safetensors"));
  CHECK(ck.result.ok());
  for (const auto& [k, v] : r.model->state_dict()) {
    INFO(k);
    CHECK(bitwise_equal(v, m.model->state_dict().at(k)));
  }
  REQUIRE(ck.find("scale"));
  CHECK(ck.find("scale")->to_vector() == std::vector<double>{2.0, 0.5});
  CHECK(ck.extras.metadata.at("classes") == "a,b,c");
  CHECK(ck.epoch == 0);
  const std::string model_again = dir.file("model_again.safetensors");
  layers::save(*m.model, model_again,
               layers::SaveOptions{.extra_tensors = {{"scale", *ck.find("scale")}}, .metadata = {{"classes", "a,b,c"}}});
  CHECK(bytes_of(model_again) == bytes_of(v1("model_v1.safetensors")));

  // and the resumed run trains on
  checkpoint_run::train_steps(r, 5);
  CHECK(r.model->state_dict().at("1.num_batches_tracked").item() == 10);
}

TEST_CASE("a layer fixes up its own state: BatchNorm's counter in the norm layer, any module through the hook",
          "[checkpoint][archive]") {
  Generator g(0);
  layers::Sequential net({std::make_shared<layers::Linear>(2, 3, true, Dtype::Float32, g),
                          std::make_shared<layers::BatchNorm1d>(3), std::make_shared<Counter>(),
                          std::make_shared<Upgrading>()});
  layers::StateDict old;
  for (const auto& [k, v] : net.state_dict())
    if (k != "1.num_batches_tracked" && k != "2.num_batches_tracked" && k != "3.scale") old.insert(k, v.clone());
  old.insert("3.old_scale", Tensor::from_vector({3.0, 4.0}, {2}));

  // strict: only the Counter's key is missing (no norm layer: nothing to derive it from)
  REQUIRE_THROWS_WITH(net.load_state_dict(old), Catch::Contains("Missing keys: 2.num_batches_tracked") &&
                                                     !Catch::Contains("1.num_batches_tracked"));
  const layers::LoadResult res = net.load_state_dict(old, layers::LoadOptions{.strict = false});
  REQUIRE(res.filled.size() == 2);
  CHECK(res.filled[0].rfind("1.num_batches_tracked = 0 (absent from the state dict", 0) == 0);
  CHECK(res.filled[1] == "3.scale = 3.old_scale");
  CHECK(res.missing_keys == std::vector<std::string>{"2.num_batches_tracked"});
  CHECK(res.unexpected_keys == std::vector<std::string>{"3.old_scale"});
  const auto* up = dynamic_cast<const Upgrading*>(net.named_children()[3].second.get());
  REQUIRE(up);
  CHECK(up->prefixes.back() == "3.");
  CHECK(net.state_dict().at("3.scale").to_vector() == std::vector<double>{3.0, 4.0});
}

TEST_CASE("LoadOptions' key changes apply to every file load and are reported", "[checkpoint][archive]") {
  TempDir dir;
  Generator g(0);
  layers::Linear a(2, 2, true, Dtype::Float32, g);
  Archive ar;
  a.save_to(ar, "module.fc.");
  layers::Linear b(2, 2, true, Dtype::Float32, g);
  REQUIRE_THROWS_WITH(b.load_from(ar), Catch::Contains("Missing keys: weight, bias"));
  const layers::LoadResult r =
      b.load_from(ar, layers::LoadOptions{.strip_prefixes = {"module."}, .renames = {{"fc.weight", "weight"}, {"fc.bias", "bias"}}});
  CHECK(r.key_changes == std::vector<std::string>{"stripped 'module.' from 2 keys", "renamed fc.weight -> weight",
                                                  "renamed fc.bias -> bias"});
  CHECK(r.report().find("stripped 'module.' from 2 keys") != std::string::npos);
  CHECK(bitwise_equal(b.weight, a.weight));
  // through a file: layers::load takes the same options
  ar.save(dir.file("dp.safetensors"));
  layers::Linear c(2, 2, true, Dtype::Float32, g);
  layers::load(c, dir.file("dp.safetensors"), layers::LoadOptions{.strip_prefixes = {"module.fc."}});
  CHECK(bitwise_equal(c.bias, a.bias));
  REQUIRE_THROWS_WITH(layers::load(c, dir.file("dp.safetensors"), layers::LoadOptions{.strip_prefixes = {"model."}}),
                      Catch::Contains("Missing keys"));
}

TEST_CASE("a training checkpoint keeps its extras under \"extra/\" as a module file does, and refuses bad ones",
          "[checkpoint][archive]") {
  TempDir dir;
  checkpoint_run::Run r = checkpoint_run::make_run(false, 5);
  checkpoint_run::train_steps(r, 2);
  // names of the training state are free for extras: they can no longer be taken for it
  optim::CheckpointExtras extras;
  extras.tensors = {{"epoch", Tensor::from_int64({42}, {})}, {"model.0.weight", Tensor::from_vector({7.0}, {1})}};
  extras.metadata = {{"note", "x"}};
  const std::string path = dir.file("t.safetensors");
  optim::save_training_checkpoint(path, *r.model, *r.opt, 2, r.sched.get(), &r.data, &extras);
  const Archive a = Archive::load(path);
  CHECK(a.metadata("format_version") == "2");
  REQUIRE(a.find("extra/epoch"));
  CHECK(a.find("extra/epoch")->item() == 42);
  CHECK(a.find("epoch")->item() == 2);
  const auto x = optim::training_checkpoint_extras(a);
  REQUIRE(x.size() == 2);
  CHECK(x[0].first == "epoch");
  CHECK(x[1].first == "model.0.weight");
  CHECK(x[1].second.to_vector() == std::vector<double>{7.0});

  checkpoint_run::Run fresh = checkpoint_run::make_run(false, 6);
  CHECK(optim::load_training_checkpoint(path, *fresh.model, *fresh.opt, fresh.sched.get(), &fresh.data) == 2);
  for (const auto& [k, v] : r.model->state_dict()) {
    INFO(k);
    CHECK(bitwise_equal(v, fresh.model->state_dict().at(k)));
  }

  // refused before anything is written: the old file stays
  const std::vector<char> before = bytes_of(path);
  auto refused = [&](optim::CheckpointExtras bad) {
    optim::save_training_checkpoint(path, *r.model, *r.opt, 3, r.sched.get(), &r.data, &bad);
  };
  CHECK_THROWS_WITH(refused({.tensors = {{"", Tensor::zeros({1})}}}),
                    Catch::Contains("save_training_checkpoint('" + path + "'): an extra tensor has an empty name"));
  CHECK_THROWS_WITH(refused({.tensors = {{"m", Tensor::zeros({1})}, {"m", Tensor::zeros({1})}}}),
                    Catch::Contains("extra tensor 'm' given twice"));
  CHECK_THROWS_WITH(refused({.tensors = {{"u", Tensor()}}}), Catch::Contains("extra tensor 'u' is undefined"));
  CHECK_THROWS_WITH(refused({.metadata = {{"optimizer", "mine"}}}),
                    Catch::Contains("extra metadata 'optimizer' uses a reserved key"));
  CHECK(bytes_of(path) == before);

  // a format the reader does not know
  Archive future = Archive::load(path);
  Archive copy;
  for (const auto& [k, t] : future.tensors()) copy.write(k, t);
  for (const auto& [k, v] : future.metadata()) copy.set_metadata(k, v);
  copy.set_metadata("format_version", "3");
  copy.save(dir.file("v3.safetensors"));
  CHECK_THROWS_WITH(optim::load_training_checkpoint(dir.file("v3.safetensors"), *fresh.model, *fresh.opt,
                                                    fresh.sched.get(), &fresh.data),
                    Catch::Contains("expected format_version 1 or 2, got '3'"));
}
