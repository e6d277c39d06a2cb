// The Fashion-MNIST trainer: real learning on a subset, exact resume, option checks.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/batch_norm.h>
#include "checkpoint_io.h"
#include <tapegrad/core/safetensors.h>
#include <tapegrad/data/idx.h>
#include "trainer.h"
#include "fmnist_test_support.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

using fmnist_test::TempDir;

// 1,800 training and 200 validation images.
fmnist::Config small_config(const std::string& checkpoint = "") { return fmnist_test::short_run(2000, 1, checkpoint); }

}  // namespace

TEST_CASE("parse_hidden", "[fmnist]") {
  REQUIRE(fmnist::parse_hidden("256,128") == std::vector<std::int64_t>{256, 128});
  REQUIRE(fmnist::parse_hidden("32") == std::vector<std::int64_t>{32});
  REQUIRE_THROWS_WITH(fmnist::parse_hidden("256,x"), Catch::Contains("'x'"));
  REQUIRE_THROWS_WITH(fmnist::parse_hidden("256,0"), Catch::Contains("'0'"));
  REQUIRE_THROWS_WITH(fmnist::parse_hidden("12a"), Catch::Contains("'12a'"));
  REQUIRE_THROWS_WITH(fmnist::parse_hidden("32,64,"), Catch::Contains("got '' in '32,64,'"));
  REQUIRE_THROWS_WITH(fmnist::parse_hidden("1,,2", "--channels"),
                      Catch::StartsWith("--channels: expected positive integers") && Catch::Contains("got '' in '1,,2'"));
}

TEST_CASE("model layout and evaluate() in eval mode without tape and with the mode restored", "[fmnist]") {
  tapegrad::ModeChecksPause pause;  // an untrained net evaluated for its layout: never-updated statistics, on purpose
  fmnist::Config c;
  c.hidden = {8, 4};
  Generator init(0), drop(1);
  auto m = fmnist::build_model(c, 6, 3, init, &drop);
  // Linear, BatchNorm1d, ReLU, Dropout per hidden layer, then Linear.
  REQUIRE(m->size() == 9);
  REQUIRE((*m)[1]->type_name() == "BatchNorm1d");
  REQUIRE((*m)[3]->type_name() == "Dropout");
  c.norm = "layer";
  c.dropout = 0;
  REQUIRE((*fmnist::build_model(c, 6, 3, init, &drop))[1]->type_name() == "LayerNorm");
  REQUIRE(fmnist::build_model(c, 6, 3, init, &drop)->size() == 7);  // no Dropout modules
  c.norm = "group";
  REQUIRE_THROWS_WITH(fmnist::build_model(c, 6, 3, init, &drop), Catch::Contains("'group'"));

  Generator g(3);
  data::Dataset ds = data::Dataset::make(randn({10, 6}, Dtype::Float32, g),
                                         Tensor::from_int64({0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {10}));
  auto bn = std::static_pointer_cast<layers::BatchNormBase>((*m)[1]);
  const auto running_before = bn->running_mean.to_vector();
  m->train();
  std::vector<std::vector<std::int64_t>> conf;
  const double acc = fmnist::evaluate(*m, ds, &conf, 4);
  REQUIRE(m->is_training());
  REQUIRE(bn->running_mean.to_vector() == running_before);  // eval(): statistics untouched
  REQUIRE(autograd::tape_size() == 0);                       // NoGradGuard: nothing recorded
  std::int64_t total = 0, diag = 0;
  for (std::size_t i = 0; i < conf.size(); ++i)
    for (std::size_t j = 0; j < conf.size(); ++j) {
      total += conf[i][j];
      if (i == j) diag += conf[i][j];
    }
  REQUIRE(conf.size() == 3);
  REQUIRE(total == 10);
  REQUIRE(acc == Approx(static_cast<double>(diag) / 10.0));
  m->eval();
  fmnist::evaluate(*m, ds);
  REQUIRE_FALSE(m->is_training());
}

TEST_CASE("2 epochs on 2000 images reach over 70% test accuracy", "[fmnist]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  const fmnist::Result r = fmnist::train(small_config());
  REQUIRE(r.history.size() == 2);
  INFO("train loss " << r.history[0].train_loss << " -> " << r.history[1].train_loss << ", val acc "
                     << r.history[1].val_accuracy << ", test acc " << r.test_accuracy);
  REQUIRE(r.history[1].train_loss < r.history[0].train_loss);
  REQUIRE(r.history[0].train_loss < 2.302585);  // below chance level ln(10)
  REQUIRE(r.test_accuracy > 0.70);
  std::int64_t total = 0;
  for (const auto& row : r.confusion)
    for (auto v : row) total += v;
  REQUIRE(total == 10000);
}

TEST_CASE("an interrupted and resumed run matches the uninterrupted one exactly", "[fmnist]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  TempDir dir;
  fmnist::Config c = small_config(dir.file("full.safetensors"));
  const fmnist::Result full = fmnist::train(c);

  c.checkpoint = dir.file("part.safetensors");
  c.stop_after = 1;
  const fmnist::Result part = fmnist::train(c);
  REQUIRE(part.epochs_done == 1);
  REQUIRE(fs::exists(c.checkpoint + ".last"));

  c.stop_after.reset();
  c.resume = c.checkpoint + ".last";
  const fmnist::Result resumed = fmnist::train(c);
  REQUIRE(resumed.history.size() == 1);
  REQUIRE(resumed.history[0].epoch == 2);
  // Bit-for-bit: the same losses, accuracies, and every parameter, buffer and counter.
  REQUIRE(resumed.history[0].train_loss == full.history[1].train_loss);
  REQUIRE(resumed.history[0].val_accuracy == full.history[1].val_accuracy);
  REQUIRE(resumed.final_state.size() == full.final_state.size());
  for (std::size_t i = 0; i < full.final_state.size(); ++i) {
    INFO(full.final_state[i].first);
    REQUIRE(resumed.final_state[i].first == full.final_state[i].first);
    REQUIRE(resumed.final_state[i].second.to_vector() == full.final_state[i].second.to_vector());
  }
  REQUIRE(resumed.test_accuracy == full.test_accuracy);
  REQUIRE(resumed.confusion == full.confusion);

  // A checkpoint does not resume a different network, and says why: the setting that differs
  // (from its fmnist.* metadata), or, without that metadata, the tensors strict loading misses.
  c.norm = "none";
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("holds a model with --norm batch") &&
                                            Catch::Contains("asks for --norm none"));
  {
    SafetensorsContent f = load_safetensors(c.resume);
    f.metadata.erase("fmnist.norm");
    save_safetensors(dir.file("no_arch.last"), f.tensors, f.metadata);
    const std::string keep = c.resume;
    c.resume = dir.file("no_arch.last");
    REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("1.running_mean"));
    c.resume = keep;
  }
  c.norm = "batch";
  c.optimizer = "sgd";
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("Adam") && Catch::Contains("SGD"));
}

TEST_CASE("missing data names the Debian package", "[fmnist]") {
  TempDir dir;
  fmnist::Config c = small_config();
  c.data_dir = dir.path.string();
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("dataset-fashion-mnist"));
  c = small_config();
  c.dropout = 1.0;
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("--dropout"));
}

TEST_CASE("a --data folder with fewer images than the validation split names --data and the counts", "[fmnist]") {
  // 30 training and 10 test images of 28 x 28: the default split holds out 5,000.
  TempDir dir;
  auto write = [&](const std::string& name, std::int64_t n) {
    data::IdxArray images;
    images.dims = {n, 28, 28};
    images.payload.assign(static_cast<std::size_t>(n * 28 * 28), 7);
    data::write_idx(dir.file(name + "-images-idx3-ubyte"), images, false);
    data::IdxArray labels;
    labels.dims = {n};
    for (std::int64_t i = 0; i < n; ++i) labels.payload.push_back(static_cast<std::uint8_t>(i % 10));
    data::write_idx(dir.file(name + "-labels-idx1-ubyte"), labels, false);
  };
  write("train", 30);
  write("t10k", 10);
  fmnist::Config c = small_config();
  c.limit = 0;
  c.data_dir = dir.path.string();
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("--data " + dir.path.string()) && Catch::Contains("30 training images") &&
                                            Catch::Contains("5000 held out") && Catch::Contains("--limit") &&
                                            !Catch::Contains("train_val_split"));
  c.val_size = 30;  // all of them: nothing left to train on
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("30 training images") && Catch::Contains("30 held out") &&
                                            Catch::Contains("(val_size)"));
  c.val_size = 3;  // 27 to train on: the run goes past the split
  c.epochs = 1;
  c.batch_size = 9;
  REQUIRE_NOTHROW(fmnist::train(c));
}

TEST_CASE("output and resume paths are checked before any work", "[fmnist][paths]") {
  TempDir dir;
  fmnist::Config c = small_config();
  c.data_dir = dir.file("no-data-here");  // data loading would fail: these must fail first
  c.checkpoint = dir.file("missing/folder/model.safetensors");
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("does not exist") && !Catch::Contains("dataset-fashion-mnist"));
  c.checkpoint = "/dev/null";  // a device node: once replaced by a regular file
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("character device"));
  REQUIRE(fs::status("/dev/null").type() == fs::file_type::character);
  c.checkpoint = dir.path.string();  // a folder
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("is a directory"));
  c.checkpoint = "/proc/model.safetensors";
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("cannot create a temp file"));
  c.checkpoint.clear();
  c.resume = dir.path.string();  // a folder given as a checkpoint was std::bad_alloc
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("is a directory"));
  c.resume = dir.file("nope.safetensors");
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("nope.safetensors") && Catch::Contains("No such file"));
}

TEST_CASE("a checkpoint alone reproduces the predictions: preprocessing and architecture are saved", "[fmnist]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  TempDir dir;
  fmnist::Config c = small_config(dir.file("best.safetensors"));
  const fmnist::Result r = fmnist::train(c);

  const fmnist::CheckpointInfo info = fmnist::read_checkpoint_info(c.checkpoint);
  REQUIRE(info.standardizer.has_value());
  REQUIRE(info.architecture.has_value());
  CHECK(info.architecture->hidden == c.hidden);
  CHECK(info.architecture->norm == "batch");
  CHECK(info.architecture->epochs == 2);
  // The training images' statistics (pixels / 255): Fashion-MNIST's mean is about 0.286, std 0.353.
  CHECK(info.standardizer->mean()[0] == Approx(0.286).margin(0.01));
  CHECK(info.standardizer->stddev()[0] == Approx(0.353).margin(0.01));

  const data::Dataset raw = data::load_fashion_mnist(c.data_dir, false);
  std::vector<std::vector<std::int64_t>> confusion;
  CHECK(fmnist::evaluate_checkpoint(c.checkpoint, raw, &confusion) == r.test_accuracy);
  CHECK(confusion == r.confusion);

  // The stored statistics are what is used: other values give other predictions.
  SafetensorsContent f = load_safetensors(c.checkpoint);
  for (auto& [k, t] : f.tensors)
    if (k == "extra/preprocess.mean") t = Tensor::from_vector({0.0}, {1}, Dtype::Float64);
  for (auto& [k, t] : f.tensors)
    if (k == "extra/preprocess.std") t = Tensor::from_vector({1.0}, {1}, Dtype::Float64);
  save_safetensors(dir.file("unstandardised.safetensors"), f.tensors, f.metadata);
  CHECK(fmnist::evaluate_checkpoint(dir.file("unstandardised.safetensors"), raw) != r.test_accuracy);

  // A file without the preprocessing says so.
  std::vector<std::pair<std::string, Tensor>> bare;
  for (auto& [k, t] : f.tensors)
    if (k.rfind("extra/preprocess.", 0) != 0) bare.emplace_back(k, t);
  save_safetensors(dir.file("bare.safetensors"), bare, f.metadata);
  CHECK_THROWS_WITH(fmnist::evaluate_checkpoint(dir.file("bare.safetensors"), raw),
                    Catch::Contains("no input preprocessing"));
}

TEST_CASE("resuming with another --epochs, model, widths, norm or data is refused, naming what differs", "[fmnist]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  TempDir dir;
  fmnist::Config c = fmnist_test::short_run(600, 1, dir.file("run.safetensors"));
  c.epochs = 1;
  fmnist::train(c);
  c.resume = c.checkpoint + ".last";
  c.epochs = 3;
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("cosine schedule spans 1 epochs") &&
                                            Catch::Contains("--epochs 3") && Catch::Contains("Resume with --epochs 1"));
  // Without the schedule metadata (an older file), the lr 0 left by the schedule is caught.
  SafetensorsContent f = load_safetensors(c.resume);
  f.metadata.erase("fmnist.epochs");
  f.metadata.erase("fmnist.hidden");
  save_safetensors(dir.file("old.last"), f.tensors, f.metadata);
  c.resume = dir.file("old.last");
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("already reached lr 0"));
  // A different data subset (other standardisation) is refused too.
  c.resume = c.checkpoint + ".last";
  c.epochs = 1;
  c.schedule = "none";
  c.limit = 700;
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("standardised with mean"));
  // Another architecture names the setting from the checkpoint's fmnist.* metadata.
  c.limit = 600;
  c.model = "cnn";
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("holds a model with --model mlp") &&
                                            Catch::Contains("asks for --model cnn"));
  c.model = "mlp";
  const auto hidden = c.hidden;
  c.hidden = {7, 5};
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("asks for --hidden 7,5"));
  c.hidden = hidden;
  const std::string norm = c.norm;
  c.norm = norm == "batch" ? "layer" : "batch";
  REQUIRE_THROWS_WITH(fmnist::train(c), Catch::Contains("--norm " + norm) && Catch::Contains("asks for --norm " + c.norm));
}

TEST_CASE("read_checkpoint_info reads integer metadata as whole integers naming the key", "[fmnist]") {
  TempDir dir;
  const std::vector<std::pair<std::string, Tensor>> tensors{{"model.0.weight", Tensor::zeros({2, 2})}};
  const std::map<std::string, std::string> good{{"fmnist.hidden", "16"},    {"fmnist.norm", "batch"},
                                                {"fmnist.dropout", "0.2"},  {"fmnist.epochs", "3"},
                                                {"fmnist.model", "cnn"},    {"fmnist.cnn.channels", "4,8"},
                                                {"fmnist.cnn.head", "16"},  {"fmnist.cnn.groups", "4"}};
  save_safetensors(dir.file("good.safetensors"), tensors, good);
  const fmnist::CheckpointInfo info = fmnist::read_checkpoint_info(dir.file("good.safetensors"));
  REQUIRE(info.architecture.has_value());
  CHECK(info.architecture->epochs == 3);
  CHECK(info.architecture->cnn.head == 16);
  // std::stoi / stoll / stod read each of these as a prefix: 16.9 -> 16, 1e3 -> 1, 0.2x -> 0.2
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"fmnist.epochs", "16.9"}, {"fmnist.epochs", "1e3"}, {"fmnist.cnn.head", "16.9"},
           {"fmnist.cnn.groups", "4x"}, {"fmnist.cnn.head", "99999999999"}, {"fmnist.dropout", "0.2x"}}) {
    INFO(key << " = '" << value << "'");
    auto meta = good;
    meta[key] = value;
    save_safetensors(dir.file("bad.safetensors"), tensors, meta);
    CHECK_THROWS_WITH(fmnist::read_checkpoint_info(dir.file("bad.safetensors")),
                      Catch::Contains(key + ": expected") && Catch::Contains("got '" + value + "'"));
  }
}

TEST_CASE("a resume trusts no out-of-range counter: EpochLog's best epoch and the best file's epoch", "[fmnist]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  TempDir dir;
  fmnist::Config c = fmnist_test::short_run(600, 1, dir.file("run.safetensors"));
  c.stop_after = 1;
  c.schedule = "none";
  fmnist::train(c);
  c.stop_after.reset();
  SafetensorsContent f = load_safetensors(c.checkpoint + ".last");
  REQUIRE(f.metadata.count("callback.EpochLog.best_epoch"));
  f.metadata["callback.EpochLog.best_epoch"] = "-4";
  save_safetensors(dir.file("bad_best.last"), f.tensors, f.metadata);
  c.resume = dir.file("bad_best.last");
  CHECK_THROWS_WITH(fmnist::train(c), Catch::Contains("EpochLog: best_epoch: expected a count (an integer in [0, 1e9]), got '-4'"));
  f.metadata["callback.EpochLog.best_epoch"] = "1";
  f.metadata["callback.EpochLog.best"] = "7";
  save_safetensors(dir.file("bad_acc.last"), f.tensors, f.metadata);
  c.resume = dir.file("bad_acc.last");
  CHECK_THROWS_WITH(fmnist::train(c), Catch::Contains("best: expected a validation accuracy in [0, 1] (or -1: none), got '7'"));
  // best and best_epoch agree: -1 exactly when no epoch was recorded
  f.metadata["callback.EpochLog.best"] = "-1";
  save_safetensors(dir.file("bad_pair.last"), f.tensors, f.metadata);
  c.resume = dir.file("bad_pair.last");
  CHECK_THROWS_WITH(fmnist::train(c), Catch::Contains("EpochLog: best: expected -1 with best_epoch 0") &&
                                          Catch::Contains("got best -1 with best_epoch 1"));
  f.metadata["callback.EpochLog.best"] = "0.5";
  f.metadata["callback.EpochLog.best_epoch"] = "0";
  save_safetensors(dir.file("bad_pair0.last"), f.tensors, f.metadata);
  c.resume = dir.file("bad_pair0.last");
  CHECK_THROWS_WITH(fmnist::train(c), Catch::Contains("got best 0.5 with best_epoch 0"));
  // A checkpoint written before the training room (no train.history): the best file's epoch
  // is read to seed the best-so-far, and must be an epoch.
  f = load_safetensors(c.checkpoint + ".last");
  f.metadata.erase("train.history");
  for (auto it = f.metadata.begin(); it != f.metadata.end();)
    it = it->first.rfind("callback.", 0) == 0 || it->first == "train.callbacks" ? f.metadata.erase(it) : std::next(it);
  save_safetensors(dir.file("legacy.last"), f.tensors, f.metadata);
  SafetensorsContent best = load_safetensors(c.checkpoint);
  for (auto& [k, t] : best.tensors)
    if (k == "epoch") t = Tensor::from_int64({-2}, {});
  save_safetensors(c.checkpoint, best.tensors, best.metadata);
  c.resume = dir.file("legacy.last");
  CHECK_THROWS_WITH(fmnist::train(c), Catch::Contains("expected an epoch in [0, 1000000000], got -2"));
}
