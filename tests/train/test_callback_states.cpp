// Callback states in training checkpoints are matched by name, not position: a callback added
// on resume does not take another's state, a dropped stateful callback is refused, two of one
// kind keep their own states, checkpoints of the older "callback.<index>.<name>" layout load,
// and a flipped bit in a checkpoint's data is an error naming the tensor and the file.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/model_checkpoint.h>
#include "train/train_test_support.h"

using namespace tapegrad;
using namespace tapegrad::train;
using train_test::TempDir;

namespace {

struct Net : train_test::BlobsSetup {
  Net() : BlobsSetup(200, 60) {}
  FitResult fit(const FitOptions& o, std::vector<CallbackPtr> cbs) {
    return train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o, std::move(cbs));
  }
  FitOptions options(int epochs, std::optional<int> max_epochs = std::nullopt, const std::string& resume = "") {
    FitOptions o;
    o.epochs = epochs;
    o.validation = &val_ds;
    o.generator = &gen;
    o.max_epochs = max_epochs;
    o.resume = resume;
    return o;
  }
};

std::shared_ptr<ModelCheckpoint> checkpoint(const TempDir& dir) {
  ModelCheckpointOptions mo;
  mo.path = dir.file("ck.safetensors");
  mo.monitor = "val_accuracy";
  mo.mode = Mode::Max;
  return std::make_shared<ModelCheckpoint>(mo);
}

std::shared_ptr<EarlyStopping> early(const std::string& monitor, Mode mode) {
  return std::make_shared<EarlyStopping>(EarlyStoppingOptions{monitor, mode, 0.0, 50});
}

// The ".last" training checkpoint of a 4-epoch run with a ModelCheckpoint, stopped after max_epochs.
SafetensorsContent last_checkpoint(const TempDir& dir, int max_epochs) {
  Net a;
  a.fit(a.options(4, max_epochs), {checkpoint(dir)});
  return load_safetensors(dir.file("ck.safetensors.last"));
}

// c, saved as bad.safetensors, is refused as a resume file with a message `matches` accepts,
// and a fresh net's weights are as they were.
template <class Matcher>
void check_resume_refused(const TempDir& dir, const SafetensorsContent& c, const Matcher& matches) {
  save_safetensors(dir.file("bad.safetensors"), c.tensors, c.metadata);
  Net b;
  const auto before = b.model->state_dict().begin()->second.to_vector();
  CHECK_THROWS_WITH(b.fit(b.options(4, std::nullopt, dir.file("bad.safetensors")), {checkpoint(dir)}),
                    matches);
  CHECK(b.model->state_dict().begin()->second.to_vector() == before);
}

}  // namespace

TEST_CASE("callback states travel by name: a callback added before ModelCheckpoint on resume",
          "[train][fit][resume]") {
  TempDir dir;
  Net a;
  auto mc = checkpoint(dir);
  a.fit(a.options(4, 2), {mc});
  REQUIRE(mc->best_epoch() > 0);
  CHECK(callback_state_names({mc, early("loss", Mode::Min), early("val_loss", Mode::Min)}) ==
        std::vector<std::string>{"ModelCheckpoint", "EarlyStopping", "EarlyStopping#2"});

  Net b;
  auto mc2 = checkpoint(dir);
  auto extra = std::make_shared<LambdaCallback>(nullptr);
  b.fit(b.options(4, 0, dir.file("ck.safetensors.last")), {extra, mc2});  // restore only
  CHECK(mc2->best_epoch() == mc->best_epoch());
  CHECK(mc2->best() == mc->best());
}

TEST_CASE("resuming without a stateful callback of the checkpoint is refused, naming it", "[train][fit][resume][errors]") {
  TempDir dir;
  Net a;
  a.fit(a.options(4, 1), {checkpoint(dir), early("val_loss", Mode::Min)});
  Net b;
  const auto before = b.model->state_dict().begin()->second.to_vector();
  CHECK_THROWS_WITH(b.fit(b.options(4, 0, dir.file("ck.safetensors.last")), {early("val_loss", Mode::Min)}),
                    Catch::Contains("holds the state of ModelCheckpoint, which this run does not pass") &&
                        Catch::Contains("(its callbacks: EarlyStopping)"));
  CHECK(b.model->state_dict().begin()->second.to_vector() == before);
}

TEST_CASE("two callbacks of one kind keep their own states across a resume", "[train][fit][resume]") {
  TempDir dir;
  Net a;
  auto by_loss = early("loss", Mode::Min), by_acc = early("val_accuracy", Mode::Max);
  a.fit(a.options(4, 2), {checkpoint(dir), by_loss, by_acc});
  Net b;
  auto l2 = early("loss", Mode::Min), a2 = early("val_accuracy", Mode::Max);
  b.fit(b.options(4, 0, dir.file("ck.safetensors.last")), {checkpoint(dir), l2, a2});
  CHECK(l2->best() == by_loss->best());
  CHECK(a2->best() == by_acc->best());
  CHECK(a2->best() != l2->best());
}

TEST_CASE("a checkpoint with the older callback.<index>.<name> keys still resumes", "[train][fit][resume]") {
  TempDir dir;
  Net a;
  auto mc = checkpoint(dir);
  a.fit(a.options(4, 2), {mc});
  // Rewrite the file as the older writer laid it out: callback 0, no train.callbacks.
  SafetensorsContent c = load_safetensors(dir.file("ck.safetensors.last"));
  std::map<std::string, std::string> md;
  for (const auto& [k, v] : c.metadata) {
    if (k == kCallbacksKey) continue;
    if (k.rfind("callback.ModelCheckpoint.", 0) == 0)
      md["callback.0.ModelCheckpoint." + k.substr(std::strlen("callback.ModelCheckpoint."))] = v;
    else
      md[k] = v;
  }
  REQUIRE(md.count("callback.0.ModelCheckpoint.best_epoch"));
  save_safetensors(dir.file("old.safetensors"), c.tensors, md);
  Net b;
  auto mc2 = checkpoint(dir);
  b.fit(b.options(4, 0, dir.file("old.safetensors")), {std::make_shared<LambdaCallback>(nullptr), mc2});
  CHECK(mc2->best_epoch() == mc->best_epoch());
  CHECK(mc2->best() == mc->best());
}

TEST_CASE("a flipped bit in a training checkpoint's data is refused on resume, naming the tensor and the file",
          "[train][fit][resume][errors]") {
  TempDir dir;
  Net a;
  a.fit(a.options(4, 1), {checkpoint(dir)});
  const std::string path = dir.file("ck.safetensors.last");
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  bytes[8 + n + 1] = static_cast<char>(bytes[8 + n + 1] ^ 0x10);  // inside the first tensor's data
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Net b;
  const auto before = b.model->state_dict().begin()->second.to_vector();
  CHECK_THROWS_AS(b.fit(b.options(4, 0, path), {checkpoint(dir)}), std::runtime_error);
  CHECK_THROWS_WITH(b.fit(b.options(4, 0, path), {checkpoint(dir)}),
                    Catch::Contains("ck.safetensors.last") && Catch::Contains("tensor 'model.") &&
                        Catch::Contains("does not match its checksum"));
  CHECK(b.model->state_dict().begin()->second.to_vector() == before);
}

TEST_CASE("a resume file whose epoch is out of range is refused before anything changes", "[train][fit][resume][errors]") {
  TempDir dir;
  SafetensorsContent c = last_checkpoint(dir, 1);
  for (auto& [k, t] : c.tensors)
    if (k == "epoch") t = Tensor::from_int64({-3}, {});
  check_resume_refused(dir, c, Catch::Contains("bad.safetensors': expected an epoch in [0, 1000000000], got -3"));
}

TEST_CASE("a resume file whose best epoch is past its epoch is refused, naming the key and both values",
          "[train][fit][resume][errors]") {
  // (was: best_epoch 7 of a checkpoint written after epoch 2 was loaded as it stood)
  TempDir dir;
  SafetensorsContent c = last_checkpoint(dir, 2);
  REQUIRE(c.metadata.count("callback.ModelCheckpoint.best_epoch"));
  c.metadata["callback.ModelCheckpoint.best_epoch"] = "7";
  check_resume_refused(dir, c,
                       Catch::Contains("bad.safetensors': ModelCheckpoint: best_epoch: expected at most the checkpoint's epoch 2, got 7"));
  c.metadata["callback.ModelCheckpoint.best_epoch"] = "2";  // the epoch itself: accepted
  save_safetensors(dir.file("ok.safetensors"), c.tensors, c.metadata);
  Net d;
  auto mc = checkpoint(dir);
  CHECK_NOTHROW(d.fit(d.options(4, 0, dir.file("ok.safetensors")), {mc}));
  CHECK(mc->best_epoch() == 2);
}

TEST_CASE("a resume file whose train.epochs is not an epoch count is refused, naming the key and the text",
          "[train][fit][resume][errors]") {
  // (was: "-1" and "1x" were accepted, the key never read)
  TempDir dir;
  SafetensorsContent c = last_checkpoint(dir, 1);
  REQUIRE(c.metadata.at("train.epochs") == "4");
  for (const std::string v : {"-1", "1x", "0", ""}) {
    INFO("'" << v << "'");
    c.metadata["train.epochs"] = v;
    check_resume_refused(dir, c,
                         Catch::Contains("bad.safetensors': train.epochs: expected") && Catch::Contains("'" + v + "'"));
  }
}
