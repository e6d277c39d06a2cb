// train_fashion_mnist --model cnn: the model layout, and a CNN checkpoint (weights, BatchNorm2d
// buffers, optimizer state) that resumes exactly.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include <tapegrad/core/mode_checks.h>

#include "trainer.h"
#include "fmnist_test_support.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {


fmnist::Config small_cnn_config() {
  fmnist::Config c = fmnist_test::short_run(1000, 3);  // 900 training and 100 validation images
  c.model = "cnn";
  c.cnn.channels = {4, 8};
  c.cnn.head = 16;
  c.cnn.groups = 4;
  return c;
}

}  // namespace

TEST_CASE("the cnn model (--model cnn) builds Unflatten + models::CNN with the chosen norm", "[fmnist][cnn]") {
  tapegrad::ModeChecksPause pause;  // untrained nets evaluated for their shapes: never-updated statistics, on purpose
  fmnist::Config c = small_cnn_config();
  Generator init(0), drop(1);
  for (const char* norm : {"batch", "group", "instance", "layer", "none"}) {
    c.norm = norm;
    auto m = fmnist::build_model(c, 784, 10, init, &drop);
    REQUIRE(m->size() == 2);
    REQUIRE((*m)[0]->type_name() == "Unflatten");
    REQUIRE((*m)[1]->type_name() == "CNN");
    m->eval();
    REQUIRE((*m)(Tensor::zeros({3, 784})).shape() == Shape{3, 10});
  }
  c.norm = "batch";
  const auto sd = fmnist::build_model(c, 784, 10, init, &drop)->state_dict();
  REQUIRE(sd.find("1.0.weight") != nullptr);       // Conv2d(1, 4)
  REQUIRE(sd.find("1.1.running_var") != nullptr);  // BatchNorm2d(4)
  c.norm = "bogus";
  REQUIRE_THROWS_WITH(fmnist::build_model(c, 784, 10, init, &drop), Catch::Contains("'bogus'"));
  c.norm = "batch";
  REQUIRE_THROWS_WITH(fmnist::build_model(c, 780, 10, init, &drop), Catch::Contains("square"));
  c.model = "rnn";
  REQUIRE_THROWS_WITH(fmnist::build_model(c, 784, 10, init, &drop), Catch::Contains("'rnn'"));
}

TEST_CASE("an interrupted and resumed CNN run matches the uninterrupted one exactly", "[fmnist][cnn]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  const fs::path dir = fs::temp_directory_path() / ("tapegrad_fmnist_cnn_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fmnist::Config c = small_cnn_config();
  c.checkpoint = (dir / "full.safetensors").string();
  const fmnist::Result full = fmnist::train(c);
  REQUIRE(full.test_accuracy > 0.5);  // it learns: 10 classes, chance is 0.1

  c.checkpoint = (dir / "part.safetensors").string();
  c.stop_after = 1;
  REQUIRE(fmnist::train(c).epochs_done == 1);
  c.stop_after.reset();
  c.resume = c.checkpoint + ".last";
  const fmnist::Result resumed = fmnist::train(c);
  REQUIRE(resumed.history.size() == 1);
  REQUIRE(resumed.history[0].train_loss == full.history[1].train_loss);
  REQUIRE(resumed.final_state.size() == full.final_state.size());
  bool saw_bn2d_buffer = false;
  for (std::size_t i = 0; i < full.final_state.size(); ++i) {
    INFO(full.final_state[i].first);
    REQUIRE(resumed.final_state[i].first == full.final_state[i].first);
    REQUIRE(resumed.final_state[i].second.to_vector() == full.final_state[i].second.to_vector());
    saw_bn2d_buffer |= full.final_state[i].first == "1.1.running_mean";
  }
  REQUIRE(saw_bn2d_buffer);
  REQUIRE(resumed.test_accuracy == full.test_accuracy);
  // the checkpoint does not resume a CNN of another width
  c.cnn.channels = {4, 6};
  REQUIRE_THROWS(fmnist::train(c));
  std::error_code ec;
  fs::remove_all(dir, ec);
}
