// train_fashion_mnist against impossible input: a checkpoint with a negative running_var or
// a NaN weight, lying architecture metadata, a --limit that leaves no validation split and a
// --stop-after below 1. None of these needs the dataset: every refusal comes before any
// image is read or evaluated.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <map>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/optim/adam.h>
#include "checkpoint_io.h"
#include "fmnist_test_support.h"
#include "trainer.h"

using namespace tapegrad;
using Catch::Matchers::Contains;

namespace {

// A tiny stand-in for the test split (the checks fail before it is looked at).
data::Dataset tiny_test_set() {
  return data::Dataset::make(Tensor::zeros({4, data::kFashionMnistPixels}), Tensor::from_int64({0, 1, 2, 3}, {4}));
}

// A training checkpoint of an untrained model of `cfg`, after `edit` changed the model, with
// `metadata` overriding the extras' metadata.
std::string write_checkpoint(const fmnist_test::TempDir& dir, const fmnist::Config& cfg,
                             const std::function<void(layers::Module&)>& edit,
                             const std::map<std::string, std::string>& metadata = {}) {
  Generator init(0), drop(0);
  auto model = fmnist::build_model(cfg, data::kFashionMnistPixels, data::kFashionMnistClasses, init, &drop);
  edit(*model);
  optim::Adam adam(model->parameters());
  auto extras = fmnist::checkpoint_extras(cfg, data::Standardizer::from_stats(data::kFashionMnistPixels, {0.3}, {0.35}));
  for (const auto& [k, v] : metadata) extras.metadata[k] = v;
  const std::string path = dir.file("ck.safetensors");
  optim::save_training_checkpoint(path, *model, adam, 1, nullptr, nullptr, &extras);
  return path;
}

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG TYPE: ") + e.what();
  }
  return "NO EXCEPTION";
}

}  // namespace

TEST_CASE("train_fashion_mnist --evaluate refuses a checkpoint with a negative running_var or a NaN weight, naming file and tensor",
          "[fmnist][reliability]") {
  fmnist_test::TempDir dir;
  fmnist::Config cfg;
  cfg.hidden = {16};
  const std::string neg = write_checkpoint(dir, cfg, [](layers::Module& m) {
    m.state_dict().at("1.running_var").data<float>()[3] = -1.0f;
  });
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::evaluate_checkpoint(neg, tiny_test_set()); }),
             Contains("ck.safetensors") && Contains("1.running_var") && Contains(">= 0") && Contains("-1"));

  const std::string nan = write_checkpoint(dir, cfg, [](layers::Module& m) {
    m.state_dict().at("0.weight").data<float>()[0] = std::nanf("");
  });
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::evaluate_checkpoint(nan, tiny_test_set()); }),
             Contains("ck.safetensors") && Contains("0.weight") && Contains("finite"));
}

TEST_CASE("train_fashion_mnist --evaluate checks the tensors against lying metadata before building anything", "[fmnist][reliability]") {
  fmnist_test::TempDir dir;
  fmnist::Config cfg;
  cfg.model = "cnn";
  cfg.cnn.channels = {4, 8};
  cfg.cnn.head = 16;
  const std::string path =
      write_checkpoint(dir, cfg, [](layers::Module&) {}, {{"fmnist.cnn.channels", "4000000,4000000"}});
  const std::string msg = message_of<std::invalid_argument>([&] { fmnist::evaluate_checkpoint(path, tiny_test_set()); });
  CHECK_THAT(msg, Contains("ck.safetensors") && Contains("fmnist.cnn.channels 4000000,4000000") &&
                      Contains("[4000000, 1, 3, 3]") && Contains("[4, 1, 3, 3]"));
  CHECK(msg.find("--channels") == std::string::npos);  // a flag the user never gave
  CHECK(msg.find("out of memory") == std::string::npos);

  fmnist::Config mlp;
  mlp.hidden = {16, 8};
  const std::string p2 = write_checkpoint(dir, mlp, [](layers::Module&) {}, {{"fmnist.hidden", "16"}});
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::evaluate_checkpoint(p2, tiny_test_set()); }),
             Contains("fmnist.hidden 16") && Contains("[10, 16]") && Contains("[8, 16]"));
}

TEST_CASE("train_fashion_mnist --limit leaving no validation split and --stop-after < 1 are refused before any work",
          "[fmnist][reliability]") {
  fmnist::Config c;
  c.progress = false;
  c.data_dir = "/nonexistent";  // refused before the data would be read
  c.limit = 5;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(c); }),
             Contains("--limit 5") && Contains("validation"));
  c.limit = 0;
  c.stop_after = -3;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(c); }), Contains("--stop-after") && Contains("-3"));
  c.stop_after = 0;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(c); }), Contains("--stop-after"));
}

TEST_CASE("train_fashion_mnist --resume with another --optimizer, --lr, --batch-size or --dropout is refused, naming both values",
          "[fmnist][reliability]") {
  fmnist_test::TempDir dir;
  fmnist::Config c;
  c.progress = false;
  c.data_dir = "/nonexistent";  // every refusal comes before the data would be read
  c.lr = 0.01;
  c.resume = write_checkpoint(dir, c, [](layers::Module&) {});
  fmnist::Config r = c;
  r.lr = 0.02;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(r); }),
             Contains("the checkpoint's run used --lr 0.01, this run gives --lr 0.02"));
  r.lr.reset();  // Adam's default
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(r); }),
             Contains("--lr 0.01, this run gives --lr 0.001"));
  r = c;
  r.batch_size = 256;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(r); }),
             Contains("--batch-size 128, this run gives --batch-size 256"));
  r = c;
  r.dropout = 0.5;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(r); }),
             Contains("--dropout 0.20000000000000001, this run gives --dropout 0.5"));
  r = c;
  r.optimizer = "sgd";
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(r); }),
             Contains("used --optimizer adam (Adam state), this run gives --optimizer sgd (SGD)"));
  r = c;  // the same options pass the checks; the missing data is the next error
  CHECK_THAT(message_of<std::runtime_error>([&] { fmnist::train(r); }), Contains("/nonexistent"));
  r.resume.clear();
  r.lr = 0.0;
  CHECK_THAT(message_of<std::invalid_argument>([&] { fmnist::train(r); }),
             Contains("--lr: expected a finite number > 0, got 0"));
}

TEST_CASE("train_fashion_mnist --hidden too wide for memory names the widths and not std::bad_alloc", "[fmnist][reliability]") {
  fmnist::Config cfg;
  cfg.hidden = {1000000000000, 8};  // a 784 x 10^12 first Linear: no allocator can hold it
  Generator init(0), drop(0);
  CHECK_THAT(message_of<std::runtime_error>([&] {
               fmnist::build_model(cfg, data::kFashionMnistPixels, data::kFashionMnistClasses, init, &drop);
             }),
             Contains("--model mlp: out of memory allocating the parameters of --hidden 1000000000000,8"));
}
