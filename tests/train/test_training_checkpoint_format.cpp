// Training checkpoints as files: what train::load_model, optim::load_training_checkpoint and a
// fit resume accept (format 1 and 2) and refuse before anything changes (an unknown
// format_version, an epoch that is not an int64 scalar >= 0, a stray tensor in a format-2 file,
// a reserved metadata key among the extras), and extras with any name coming back exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/model_checkpoint.h>

#include "train/train_test_support.h"

using namespace tapegrad;
using train_test::TempDir;

namespace {

struct Rig {
  Generator g{3};
  layers::Linear lin{3, 2, true, Dtype::Float32, g};
  optim::SGD opt{lin.parameters(), optim::SGDOptions{0.1}};
};

// A format-2 training file with one extra "a" = (1, 2, 3), read back as its content.
SafetensorsContent good_file(const TempDir& dir) {
  Rig r;
  optim::CheckpointExtras x;
  x.tensors.emplace_back("a", Tensor::from_vector({1.f, 2.f, 3.f}, {3}));
  optim::save_training_checkpoint(dir.file("good.safetensors"), r.lin, r.opt, 4, nullptr, nullptr, &x);
  return load_safetensors(dir.file("good.safetensors"));
}

void replace(SafetensorsContent& c, const std::string& key, const Tensor& t) {
  for (auto& [k, v] : c.tensors)
    if (k == key) v = t;
}

std::vector<double> weights(const layers::Linear& l) { return l.weight.to_vector(); }

// Both readers refuse `path` with a message containing `what`, and the model is unchanged.
void both_refuse(const std::string& path, const std::string& what) {
  Rig r;
  const auto before = weights(r.lin);
  CHECK_THROWS_WITH(optim::load_training_checkpoint(path, r.lin, r.opt), Catch::Contains(what));
  CHECK_THROWS_WITH(train::load_model(path, r.lin), Catch::Contains("load_model('" + path + "')") &&
                                                         Catch::Contains(what));
  CHECK(weights(r.lin) == before);
}

}  // namespace

TEST_CASE("a training checkpoint whose epoch is not an int64 scalar >= 0 is refused before the model changes",
          "[train][checkpoint]") {
  TempDir dir;
  SafetensorsContent c = good_file(dir);
  const std::string bad = dir.file("bad.safetensors");
  struct Case {
    Tensor epoch;
    std::string message;
  };
  for (const Case& k : {Case{Tensor::from_int64({1, 2}, {2}), "expected 'epoch' to be an int64 scalar, got int64 of shape [2]"},
                        Case{Tensor::from_vector({2.7f}, {}), "expected 'epoch' to be an int64 scalar, got float32"},
                        Case{Tensor::from_vector({NAN}, {}), "expected 'epoch' to be an int64 scalar, got float32"},
                        Case{Tensor::from_int64({-5}, {}), "expected 'epoch' >= 0 (epochs done), got -5"},
                        Case{Tensor::from_int64({2}, {1, 1}), "expected 'epoch' to be an int64 scalar, got int64 of shape [1, 1]"},
                        Case{Tensor::from_int64({2}, {1}), "expected 'epoch' to be an int64 scalar, got int64 of shape [1]"}}) {
    INFO(k.message);
    SafetensorsContent e = c;
    replace(e, "epoch", k.epoch);
    save_safetensors(bad, e.tensors, e.metadata);
    both_refuse(bad, k.message);
  }
  std::erase_if(c.tensors, [](const auto& kv) { return kv.first == "epoch"; });
  save_safetensors(bad, c.tensors, c.metadata);
  both_refuse(bad, "expected an int64 scalar 'epoch', got none");
}

TEST_CASE("a training checkpoint of an unknown format_version is refused, not read as format 1", "[train][checkpoint]") {
  TempDir dir;
  const SafetensorsContent c = good_file(dir);
  for (const char* v : {"02", " 2", "3", "2 ", ""}) {
    INFO("format_version '" << v << "'");
    auto md = c.metadata;
    if (std::string(v).empty())
      md.erase("format_version");
    else
      md["format_version"] = v;
    save_safetensors(dir.file("v.safetensors"), c.tensors, md);
    both_refuse(dir.file("v.safetensors"), std::string("expected format_version 1 or 2, got '") + v + "'");
    if (!std::string(v).empty())
      CHECK_THROWS_WITH(optim::training_checkpoint_extras(Archive::load(dir.file("v.safetensors"))),
                        Catch::Contains(std::string("expected format_version 1 or 2, got '") + v + "'"));
  }
}

TEST_CASE("a format-2 training checkpoint with a tensor outside its keys is refused, not dropped", "[train][checkpoint]") {
  TempDir dir;
  SafetensorsContent c = good_file(dir);
  c.tensors.emplace_back("standardizer.mean", Tensor::from_vector({5.f}, {1}));
  save_safetensors(dir.file("top.safetensors"), c.tensors, c.metadata);
  both_refuse(dir.file("top.safetensors"), "unexpected tensor 'standardizer.mean' (format 2 holds model., "
                                           "optimizer., scheduler., epoch and extra/ keys only)");
  // format 1 kept extras there: the same file as format 1 reads it as an extra
  c.metadata["format_version"] = "1";
  save_safetensors(dir.file("v1.safetensors"), c.tensors, c.metadata);
  Rig r;
  const auto ck = train::load_model(dir.file("v1.safetensors"), r.lin);
  REQUIRE(ck.find("standardizer.mean"));
  CHECK(ck.find("standardizer.mean")->to_vector() == std::vector<double>{5.0});
  CHECK(ck.find("extra/a"));  // format 1 wrote names as they were
}

TEST_CASE("a format-2 training checkpoint with an extra without a name is refused, as its writer refuses it",
          "[train][checkpoint]") {
  TempDir dir;
  SafetensorsContent c = good_file(dir);
  c.tensors.emplace_back("extra/", Tensor::from_vector({5.f}, {1}));
  save_safetensors(dir.file("noname.safetensors"), c.tensors, c.metadata);
  both_refuse(dir.file("noname.safetensors"), "expected an extra tensor's name after 'extra/', got none");
}

TEST_CASE("a training checkpoint part that fails to load is named with its file, the model unchanged",
          "[train][checkpoint]") {
  TempDir dir;
  SafetensorsContent c = good_file(dir);
  std::erase_if(c.tensors, [](const auto& kv) { return kv.first == "model.bias"; });
  const std::string path = dir.file("nobias.safetensors");
  save_safetensors(path, c.tensors, c.metadata);
  Rig r;
  const auto before = weights(r.lin);
  CHECK_THROWS_WITH(optim::load_training_checkpoint(path, r.lin, r.opt),
                    Catch::StartsWith("load_training_checkpoint('" + path + "'): ") && Catch::Contains("bias"));
  CHECK(weights(r.lin) == before);
}

TEST_CASE("training checkpoint extras of any non-empty name come back exactly", "[train][checkpoint]") {
  TempDir dir;
  Rig r;
  optim::CheckpointExtras x;
  x.tensors.emplace_back("extra/x", Tensor::from_vector({1.f}, {1}));
  x.tensors.emplace_back("model.weight", Tensor::from_vector({2.f}, {1}));
  x.tensors.emplace_back("epoch", Tensor::from_int64({7}, {}));
  x.tensors.emplace_back("optimizer.x", Tensor::from_vector({3.0}, {1}, Dtype::Float64));
  x.tensors.emplace_back(std::string(5000, 'n'), Tensor::from_int64({9, 8}, {2}));
  x.tensors.emplace_back("__metadata__", Tensor::from_vector({4.f}, {1}));
  x.tensors.emplace_back("e\xc3\xa9\"\\", Tensor::from_vector({5.f}, {1}));
  x.metadata["user"] = "v";
  optim::save_training_checkpoint(dir.file("x.safetensors"), r.lin, r.opt, 1, nullptr, nullptr, &x);
  Rig r2;
  const auto ck = train::load_model(dir.file("x.safetensors"), r2.lin);
  CHECK(ck.epoch == 1);
  CHECK(weights(r2.lin) == weights(r.lin));
  REQUIRE(ck.extras.tensors.size() == x.tensors.size());
  for (std::size_t i = 0; i < x.tensors.size(); ++i) {
    INFO(i);
    CHECK(ck.extras.tensors[i].first == x.tensors[i].first);
    CHECK(ck.extras.tensors[i].second.dtype() == x.tensors[i].second.dtype());
    CHECK(ck.extras.tensors[i].second.to_vector() == x.tensors[i].second.to_vector());
  }
  CHECK(ck.extras.metadata.at("user") == "v");
  Rig r3;
  CHECK(optim::load_training_checkpoint(dir.file("x.safetensors"), r3.lin, r3.opt) == 1);
}

TEST_CASE("extra metadata 'rng_state' is refused at save with or without a generator", "[train][checkpoint]") {
  TempDir dir;
  Rig r;
  optim::CheckpointExtras x;
  x.metadata["rng_state"] = "mine";
  const std::string path = dir.file("rng.safetensors");
  CHECK_THROWS_WITH(optim::save_training_checkpoint(path, r.lin, r.opt, 1, nullptr, nullptr, &x),
                    Catch::Contains("extra metadata 'rng_state' uses a reserved key"));
  CHECK_THROWS_WITH(optim::save_training_checkpoint(path, r.lin, r.opt, 1, nullptr, &r.g, &x),
                    Catch::Contains("extra metadata 'rng_state' uses a reserved key"));
  CHECK_THROWS(load_safetensors(path));  // nothing written
}

namespace {

struct FitNet : train_test::BlobsSetup {
  FitNet() : BlobsSetup(200, 60) {}
  train::FitResult fit(int epochs, std::optional<int> max_epochs, const std::string& resume,
                       std::vector<train::CallbackPtr> cbs) {
    train::FitOptions o;
    o.epochs = epochs;
    o.validation = &val_ds;
    o.generator = &gen;
    o.max_epochs = max_epochs;
    o.resume = resume;
    return train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o, std::move(cbs));
  }
};

std::shared_ptr<train::ModelCheckpoint> model_checkpoint(const TempDir& dir, const std::string& name) {
  train::ModelCheckpointOptions mo;
  mo.path = dir.file(name);
  mo.monitor = "val_accuracy";
  mo.mode = train::Mode::Max;
  return std::make_shared<train::ModelCheckpoint>(mo);
}

}  // namespace

TEST_CASE("a refused resume changes neither the model nor the callbacks' states", "[train][checkpoint]") {
  TempDir dir;
  {
    FitNet a;
    a.fit(4, 2, "", {model_checkpoint(dir, "ck.safetensors")});
  }
  const SafetensorsContent good = load_safetensors(dir.file("ck.safetensors.last"));
  REQUIRE(good.metadata.at("format_version") == "2");
  struct Bad {
    const char* what;
    std::function<void(SafetensorsContent&)> edit;
  };
  const std::vector<Bad> bads = {
      {"expected format_version 1 or 2, got '3'", [](SafetensorsContent& c) { c.metadata["format_version"] = "3"; }},
      {"expected format_version 1 or 2, got ' 2'", [](SafetensorsContent& c) { c.metadata["format_version"] = " 2"; }},
      {"expected format_version 1 or 2, got ''", [](SafetensorsContent& c) { c.metadata.erase("format_version"); }},
      {"expected 'epoch' to be an int64 scalar, got float64",
       [](SafetensorsContent& c) { replace(c, "epoch", Tensor::from_vector({2.0}, {}, Dtype::Float64)); }},
      // the training state fails after the callbacks' states were read: they are put back
      {"Missing keys", [](SafetensorsContent& c) {
         std::erase_if(c.tensors, [](const auto& kv) { return kv.first.rfind("model.", 0) == 0 && kv.first.find("bias") != std::string::npos; });
       }},
  };
  for (const auto& b : bads) {
    INFO(b.what);
    SafetensorsContent c = good;
    b.edit(c);
    save_safetensors(dir.file("bad.safetensors"), c.tensors, c.metadata);
    FitNet n;
    auto mc = model_checkpoint(dir, "other.safetensors");
    const auto before = n.model->state_dict().begin()->second.to_vector();
    CHECK_THROWS_WITH(n.fit(4, std::nullopt, dir.file("bad.safetensors"), {mc}), Catch::Contains(b.what));
    CHECK(n.model->state_dict().begin()->second.to_vector() == before);
    CHECK(mc->best_epoch() == 0);
    CHECK(std::isnan(mc->best()));
  }
}

TEST_CASE("fit refuses checkpoint_extras metadata under its own keys train.* and callback.*", "[train][checkpoint]") {
  // train.stopped among the extras made every resume train 0 epochs; train.history was overwritten.
  for (const char* key : {"train.stopped", "train.history", "train.epochs", "callback.EpochLog.best"}) {
    INFO(key);
    FitNet n;
    train::FitOptions o;
    o.epochs = 2;
    o.checkpoint_extras.metadata[key] = "1";
    const auto before = n.model->state_dict().begin()->second.to_vector();
    CHECK_THROWS_WITH(train::fit(*n.model, n.loader, layers::CrossEntropyLoss{}, n.opt, nullptr, o, {}),
                      Catch::Contains(std::string("fit: checkpoint_extras metadata '") + key +
                                      "' uses a key fit writes itself (train.*, callback.*)"));
    CHECK(n.model->state_dict().begin()->second.to_vector() == before);
  }
  FitNet n;  // other names are the user's
  train::FitOptions o;
  o.epochs = 1;
  o.checkpoint_extras.metadata["trainer.note"] = "x";
  CHECK(train::fit(*n.model, n.loader, layers::CrossEntropyLoss{}, n.opt, nullptr, o, {}).epochs_run == 1);
}
