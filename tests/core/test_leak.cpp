// Memory behaviour: a long training loop keeps a flat footprint, and graphs that are
// dropped, retained or abandoned by an exception free everything once their tensors die.
// Measured as counts (live tensor bytes from allocator_stats(), live tape nodes from
// autograd::tape_size()), never as time. Under AddressSanitizer the leak checker also
// runs over the whole suite (scripts/test.sh).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;
using namespace tapegrad::layers;

namespace {

std::shared_ptr<Sequential> mlp(Generator& gen) {
  return std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Linear>(8, 16, true, Dtype::Float32, gen), std::make_shared<BatchNorm1d>(16),
      std::make_shared<ReLU>(), std::make_shared<Linear>(16, 1, true, Dtype::Float32, gen)});
}

std::size_t live_bytes() { return allocator_stats().bytes_in_use; }

}  // namespace

TEST_CASE("leak: 1,000 training steps keep a flat memory footprint and an empty tape", "[leak]") {
  Generator gen(3);
  auto net = mlp(gen);
  optim::SGDOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  optim::SGD opt(net->parameters(), o);
  const Tensor X = randn({32, 8}, Dtype::Float32, gen);
  const Tensor y = sum(X, {1}, true);  // a learnable target: the row sum
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = mse_loss((*net)(X), y);
    loss.backward();
    opt.step();
    return loss.item();
  };

  const double first_loss = step();
  for (int i = 0; i < 9; ++i) step();  // warm-up: momentum buffers now exist
  const std::size_t base_bytes = live_bytes();
  REQUIRE(autograd::tape_size() == 0);

  std::size_t max_bytes = 0, min_bytes = ~std::size_t(0), max_tape = 0;
  double last_loss = 0;
  for (int i = 0; i < 1000; ++i) {
    last_loss = step();
    max_bytes = std::max(max_bytes, live_bytes());
    min_bytes = std::min(min_bytes, live_bytes());
    max_tape = std::max(max_tape, autograd::tape_size());
  }
  INFO("live bytes after warm-up " << base_bytes << ", range over 1000 steps [" << min_bytes << ", " << max_bytes
                                   << "]");
  CHECK(max_bytes == base_bytes);
  CHECK(min_bytes == base_bytes);
  CHECK(max_tape == 0);
  CHECK(net->named_buffers()[2].second.data<std::int64_t>()[0] == 1010);  // num_batches_tracked
  CHECK(last_loss < 0.1 * first_loss);  // it really trained
}

TEST_CASE("leak: a graph dropped without backward frees its nodes and tensors", "[leak]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  Generator gen(4);
  auto net = mlp(gen);
  layers::fuse_modules(*net);  // BatchNorm1d -> ReLU as one module, one node
  const Tensor X = randn({16, 8}, Dtype::Float32, gen);
  const std::size_t base_bytes = live_bytes();
  const std::size_t base_tape = autograd::tape_size();
  {
    Tensor out = (*net)(X);  // records linear, batch_norm_relu (BatchNorm1d -> ReLU fused), linear
    CHECK(autograd::tape_size() == base_tape + 3);
    CHECK(live_bytes() > base_bytes);
  }
  CHECK(autograd::tape_size() == base_tape);
  CHECK(live_bytes() == base_bytes);
}

TEST_CASE("leak: retain_graph keeps the graph only as long as its tensors live", "[leak]") {
  Tensor w = Tensor::from_vector({1, 2, 3}, {3}, Dtype::Float64);
  w.requires_grad_();
  const std::size_t base_bytes = live_bytes();
  {
    Tensor loss = sum(square(w));
    loss.backward(Tensor(), true);
    CHECK(autograd::tape_size() == 2);  // square, sum: still there for a second backward
    loss.backward();
    CHECK(autograd::tape_size() == 0);  // freed by the backward without retain_graph
  }
  w.zero_grad();
  CHECK(live_bytes() == base_bytes);
  {
    Tensor loss = sum(square(w));
    loss.backward(Tensor(), true);
  }  // retained, then dropped
  w.zero_grad();
  CHECK(autograd::tape_size() == 0);
  CHECK(live_bytes() == base_bytes);
}

TEST_CASE("leak: a forward or backward that throws leaves nothing behind", "[leak]") {
  Generator gen(5);
  auto net = mlp(gen);
  const std::size_t base_bytes = live_bytes();
  const std::size_t base_tape = autograd::tape_size();
  // The first Linear accepts (4, 8)... then the wrong width is caught by the next layer.
  auto bad = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Linear>(8, 5, true, Dtype::Float32, gen), std::make_shared<BatchNorm1d>(16)});
  const std::size_t with_bad = live_bytes();
  CHECK_THROWS_AS((*bad)(randn({4, 8}, Dtype::Float32, gen)), std::invalid_argument);
  CHECK(autograd::tape_size() == base_tape);
  CHECK(live_bytes() == with_bad);

  // A backward stopped by anomaly mode: the half-walked graph is freed with its tensors.
  {
    AnomalyModeGuard anomaly;
    Tensor x = Tensor::from_vector({0, 0}, {1, 2}, Dtype::Float64);
    x.requires_grad_();
    Tensor loss = sum(pow(sum(square(x), {1}), 0.5));
    CHECK_THROWS_AS(loss.backward(), std::runtime_error);
  }
  CHECK(autograd::tape_size() == base_tape);
  bad.reset();
  CHECK(live_bytes() == base_bytes);
}

TEST_CASE("leak: evaluation under NoGradGuard records nothing", "[leak]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  Generator gen(6);
  auto net = mlp(gen);
  net->eval();
  const Tensor X = randn({16, 8}, Dtype::Float32, gen);
  const std::size_t base_tape = autograd::tape_size();
  NoGradGuard ng;
  for (int i = 0; i < 100; ++i) {
    Tensor out = (*net)(X);
    CHECK(autograd::tape_size() == base_tape);
    CHECK_FALSE(out.requires_grad());
  }
}
