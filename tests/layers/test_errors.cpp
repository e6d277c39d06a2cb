// Bad input to Linear, BatchNorm1d/2d, SGD and Module::load_state_dict: each case of
// docs/errors.md ("Layers", "Optimizers", "Checkpoints") gets the documented exception
// type, a message naming expected and actual, and leaves the module unchanged.
#include <catch2/catch.hpp>

#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::layers;
using Catch::Matchers::Contains;
using tapegrad::test::f32;
using tapegrad::test::thrown;

namespace {
// Linear(2, 3) -> BatchNorm1d(3), seeded.
std::shared_ptr<Sequential> small_net() {
  Generator gen(7);
  return std::make_shared<Sequential>(
      std::initializer_list<ModulePtr>{std::make_shared<Linear>(2, 3, true, Dtype::Float32, gen),
                                       std::make_shared<BatchNorm1d>(3)});
}

// A copy of every tensor of a state dict (to compare "before" and "after").
StateDict snapshot(const Module& m) {
  StateDict out;
  for (auto& [k, t] : m.state_dict()) out.insert(k, t.clone());
  return out;
}
bool same_values(const StateDict& a, const StateDict& b) {
  if (a.keys() != b.keys()) return false;
  for (auto& [k, t] : a)
    if (t.to_vector() != b.at(k).to_vector()) return false;
  return true;
}
}  // namespace

// ---- layers ---------------------------------------------------------------------------

TEST_CASE("errors: Linear names the expected feature count and the input shape", "[errors]") {
  Linear lin(3, 5);
  CHECK_THAT(thrown<std::invalid_argument>([&] { lin(f32({2, 4})); }),
             Contains("(*, 3)") && Contains("[2, 4]") && Contains("[5, 3]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { lin(Tensor::scalar(1.0, Dtype::Float32)); }),
             Contains("(*, 3)") && Contains("[]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { lin(Tensor::ones({2, 3}, Dtype::Float64)); }),
             Contains("dtype mismatch") && Contains("float64") && Contains("float32"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { Linear(-1, 5); }), Contains("in_features=-1"));
  // Any number of leading dims is fine, as in PyTorch: (*, in) -> (*, out).
  CHECK(lin(f32({4, 2, 3})).shape() == Shape{4, 2, 5});
}

TEST_CASE("errors: BatchNorm1d/2d name the expected rank or channels and the input shape", "[errors]") {
  BatchNorm1d bn1(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32({2, 4})); }),
             Contains("BatchNorm1d") && Contains("expected 3 channels") && Contains("[2, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32({2, 3, 4, 4})); }),
             Contains("2D (N, C) or 3D (N, C, L)") && Contains("4D") && Contains("[2, 3, 4, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32({3})); }), Contains("1D") && Contains("[3]"));
  BatchNorm2d bn2(3);
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn2(f32({2, 3, 4})); }),
             Contains("BatchNorm2d") && Contains("4D (N, C, H, W)") && Contains("3D") && Contains("[2, 3, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn2(f32({2, 5, 4, 4})); }),
             Contains("expected 3 channels") && Contains("[2, 5, 4, 4]"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(Tensor::ones({2, 3}, Dtype::Float64)); }),
             Contains("float64") && Contains("float32"));
  // Nothing above touched the running statistics.
  CHECK(bn1.batches_tracked() == 0);
  CHECK(bn2.batches_tracked() == 0);
}

TEST_CASE("errors: BatchNorm options out of range name the value", "[errors]") {
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm1d(0); }), Contains("num_features") && Contains("0"));
  BatchNormOptions o;
  o.momentum = 1.5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm1d(3, o); }),
             Contains("momentum must be in [0, 1]") && Contains("1.5"));
  o.momentum = -0.1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm1d(3, o); }), Contains("-0.1"));
  o.momentum = 0.1;
  o.eps = -1e-5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { BatchNorm2d(3, o); }), Contains("eps must be >= 0"));
  // A Keras decay is not a momentum: decay 0.99 is momentum 0.01, and decay 1.5 is refused.
  CHECK(momentum_from_decay(0.99) == Approx(0.01));
  CHECK_THAT(thrown<std::invalid_argument>([&] { momentum_from_decay(1.5); }), Contains("[0, 1]") && Contains("1.5"));
}

TEST_CASE("errors: BatchNorm training with one value per channel, or an empty batch, changes nothing", "[errors]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  // PyTorch: "Expected more than 1 value per channel when training" for (1, C) and
  // (1, C, 1); tapegrad also refuses the empty batch (PyTorch would count it in
  // num_batches_tracked). Each leaves running_mean, running_var and num_batches_tracked as
  // they were.
  BatchNorm1d bn1(3);
  BatchNorm2d bn2(3);
  const StateDict before1 = snapshot(bn1), before2 = snapshot(bn2);
  for (const Shape& s : {Shape{1, 3}, Shape{1, 3, 1}, Shape{0, 3}, Shape{0, 3, 5}})
    CHECK_THAT(thrown<std::invalid_argument>([&] { bn1(f32(s, 2.0)); }),
               Contains("more than 1 value per channel") && Contains(shape_str(s)) && Contains("eval()"));
  for (const Shape& s : {Shape{1, 3, 1, 1}, Shape{0, 3, 2, 2}})
    CHECK_THAT(thrown<std::invalid_argument>([&] { bn2(f32(s, 2.0)); }),
               Contains("more than 1 value per channel") && Contains(shape_str(s)));
  CHECK(same_values(snapshot(bn1), before1));
  CHECK(same_values(snapshot(bn2), before2));
  CHECK(bn1.batches_tracked() == 0);
  // One sample with a length, (1, C, L>1), has L values per channel: accepted (as PyTorch).
  bn1(f32({1, 3, 2}));
  CHECK(bn1.batches_tracked() == 1);
  // In eval mode one sample, and an empty batch, go through the running statistics.
  bn1.eval();
  CHECK(bn1(f32({1, 3})).shape() == Shape{1, 3});
  CHECK(bn1(f32({0, 3})).shape() == Shape{0, 3});
}

// ---- optimizers -----------------------------------------------------------------------

TEST_CASE("errors: SGD refuses a negative lr, a negative momentum and a bad nesterov setup", "[errors]") {
  Tensor w = Tensor::ones({3}, Dtype::Float32);
  w.requires_grad_();
  optim::SGDOptions o;
  o.lr = -0.1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({w}, o); }),
             Contains("learning rate") && Contains("-0.1"));
  o.lr = 0.1;
  o.momentum = -0.5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({w}, o); }), Contains("momentum") && Contains("-0.5"));
  o.momentum = 0.0;
  o.weight_decay = -1.0;
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({w}, o); }), Contains("weight_decay") && Contains("-1"));
  o.weight_decay = 0.0;
  o.nesterov = true;
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({w}, o); }), Contains("nesterov"));
}

// ---- checkpoints ----------------------------------------------------------------------

TEST_CASE("errors: strict load_state_dict lists missing, unexpected and mis-shaped keys and loads nothing",
          "[errors]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  auto net = small_net();
  const StateDict before = snapshot(*net);
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
    CHECK(same_values(snapshot(*net), before));
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
    CHECK(same_values(snapshot(*net), before));
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
    CHECK(same_values(snapshot(*net), before));
  }
  SECTION("everything wrong at once is reported at once") {
    StateDict ck;
    ck.insert("0.weight", f32({2, 2}));
    ck.insert("extra", f32({1}));
    const std::string msg = thrown<std::invalid_argument>([&] { net->load_state_dict(ck); });
    CHECK_THAT(msg, Contains("Missing keys: 0.bias") && Contains("Unexpected keys: extra") &&
                        Contains("0.weight: expected [3, 2] float32, got [2, 2] float32"));
    CHECK(same_values(snapshot(*net), before));
  }
}
