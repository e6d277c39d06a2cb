// Bad optimizer options and parameters (in the constructor, or changed through options() and
// checked at the next step), optimizer state refused when loaded, and the optional
// non-finite check at step() (optim/finite_check.h): docs/errors.md, "Optimizers".
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/core/safetensors.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/finite_check.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/rmsprop.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {
Tensor param(const std::vector<double>& v) {
  Tensor t = Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, Dtype::Float32);
  t.requires_grad_();
  return t;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Adam over w = [1, 1] (float64) after one step with the gradient [1, 1]: its state holds step 1.
struct SteppedAdam {
  Tensor w = tapegrad::test::leaf64({2}, 1.0);
  optim::Adam adam{std::vector<Tensor>{w}};
  SteppedAdam() {
    w.set_grad(Tensor::ones({2}, Dtype::Float64));
    adam.step();
  }
};
}  // namespace

TEST_CASE("errors: optimizer options out of range name the option and the value", "[errors]") {
  Tensor w = param({1, 2});
  optim::AdamOptions a;
  a.betas = {0.9, 1.0};
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::Adam({w}, a); }),
             Contains("beta at index 1") && Contains("[0, 1)"));
  a.betas = {-0.1, 0.999};
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::Adam({w}, a); }), Contains("beta at index 0"));
  a = {};
  a.lr = -1e-3;
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::Adam({w}, a); }), Contains("learning rate") && Contains("expected >= 0"));
  optim::RMSpropOptions r;
  r.momentum = -0.9;
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::RMSprop({w}, r); }), Contains("momentum") && Contains("-0.9"));
  // set_lr validates like the constructor (schedulers go through it) and changes nothing on error.
  optim::SGD sgd({w}, {});
  CHECK_THAT(thrown<std::invalid_argument>([&] { sgd.set_lr(0, -0.5); }), Contains("learning rate") && Contains("-0.5"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { sgd.set_lr(0, std::nan("")); }), Contains("learning rate"));
  CHECK(sgd.lr(0) == Approx(0.01));
}

TEST_CASE("errors: optimizers accept only float leaf parameters, once", "[errors]") {
  Tensor w = param({1, 2});
  Tensor nonleaf = mul(w, 2.0);
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({nonleaf}, {}); }), Contains("parameter 0") && Contains("leaf"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({w, w}, {}); }), Contains("parameter 1") && Contains("more than one"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::SGD({Tensor::zeros({}, Dtype::Int64)}, {}); }),
             Contains("int64") && Contains("buffers"));
  // A gradient whose shape does not match its parameter is caught at step(), naming both.
  optim::SGD sgd({w}, {});
  w.impl()->autograd->grad = Tensor::ones({3}, Dtype::Float32);  // bypasses set_grad's own check
  CHECK_THAT(thrown<std::invalid_argument>([&] { sgd.step(); }),
             Contains("parameter 0") && Contains("[2] float32") && Contains("[3] float32"));
}

TEST_CASE("errors: check_finite names the parameter, the element and the value", "[errors]") {
  Tensor w = param({1, 2, 3});
  Tensor b = param({0});
  optim::check_finite({w, b});  // all finite: no throw
  w.set_grad(Tensor::from_vector({0, std::numeric_limits<double>::infinity(), std::nan("")}, {3}, Dtype::Float32));
  CHECK_THAT(thrown<std::runtime_error>([&] { optim::check_finite({w, b}); }),
             Contains("parameter 0 [3] float32") && Contains("non-finite gradient") && Contains("element 1 is inf") &&
                 Contains("2 of 3"));
  optim::check_finite({w, b}, /*check_grads=*/false);  // values are finite
  {
    NoGradGuard ng;
    Tensor(b).fill_(std::nan(""));
  }
  CHECK_THAT(thrown<std::runtime_error>([&] { optim::check_finite({{"head.bias", b}}); }),
             Contains("head.bias") && Contains("non-finite value") && Contains("element 0 is nan"));
}

TEST_CASE("errors: with FiniteCheckGuard a step with a NaN gradient throws and changes nothing", "[errors]") {
  Generator gen(2);
  auto net = std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{
      std::make_shared<layers::Linear>(2, 2, true, Dtype::Float32, gen)});
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::SGD sgd(net->parameters(), o);
  const Tensor x = Tensor::from_vector({1, 2}, {1, 2}, Dtype::Float32);
  sum(square((*net)(x))).backward();
  // Poison one gradient element, as a division by zero upstream would.
  {
    NoGradGuard ng;
    net->named_parameters()[1].second.grad().data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  }
  const std::vector<double> w0 = net->named_parameters()[0].second.to_vector();
  const std::vector<double> b0 = net->named_parameters()[1].second.to_vector();
  {
    optim::FiniteCheckGuard guard(net.get());
    CHECK_THAT(thrown<std::runtime_error>([&] { sgd.step(); }),
               Contains("'0.bias'") && Contains("non-finite gradient") && Contains("element 1 is nan") &&
                   Contains("the step was not taken"));
    CHECK(net->named_parameters()[0].second.to_vector() == w0);  // the weight, checked first, is untouched too
    CHECK(net->named_parameters()[1].second.to_vector() == b0);
    CHECK_FALSE(sgd.state_dict().contains("state.0.momentum_buffer"));  // no momentum state was started
  }
  // Without the guard the step goes through and the NaN lands in the parameter.
  sgd.step();
  CHECK(std::isnan(net->named_parameters()[1].second.to_vector()[1]));
}

TEST_CASE("errors: loaded step counters are bounded: INT64_MAX is refused, the largest count allowed steps on", "[errors][reliability]") {
  // The counters saturate at INT64_MAX when stepped (core/counter.h); at load a count above
  // 2^53 (beyond what the bias correction's double holds exactly) is refused, naming the key.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMaxStep = std::int64_t{1} << 53;
  for (const bool rms : {false, true}) {
    INFO((rms ? "RMSprop" : "Adam"));
    Tensor w = param({1, 2});
    std::unique_ptr<optim::Optimizer> opt;
    if (rms) opt = std::make_unique<optim::RMSprop>(std::vector<Tensor>{w});
    else opt = std::make_unique<optim::Adam>(std::vector<Tensor>{w});
    w.set_grad(Tensor::from_vector({0.5, -0.5}, {2}, Dtype::Float32));
    opt->step();
    optim::OptimizerState s = opt->state_dict();
    s.insert("state.0.step", Tensor::from_int64({kMaxStep}, {}));
    opt->load_state_dict(s);
    opt->step();
    CHECK(opt->state_dict().at("state.0.step").data<std::int64_t>()[0] == kMaxStep + 1);
    for (double v : w.to_vector()) CHECK(std::isfinite(v));
    for (std::int64_t bad : {kMax, std::int64_t{-1}}) {
      s.insert("state.0.step", Tensor::from_int64({bad}, {}));
      CHECK_THAT(thrown<std::invalid_argument>([&] { opt->load_state_dict(s); }),
                 Contains("state.0.step") && Contains(">= 0") && Contains(std::to_string(bad)));
    }
  }
}

TEST_CASE("errors: a training checkpoint with a negative epoch is refused at save and at load naming the key",
          "[errors][reliability][checkpoint]") {
  Generator g(1);
  layers::Linear lin(2, 1, true, Dtype::Float32, g);
  optim::SGD opt(lin.parameters());
  const std::string path = "/tmp/tapegrad_negative_epoch_" + std::to_string(::getpid()) + ".safetensors";
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::save_training_checkpoint(path, lin, opt, -1); }),
             Contains("'epoch'") && Contains(">= 0") && Contains("-1"));
  CHECK_FALSE(std::filesystem::exists(path));
  // a file that holds one anyway (written as a plain safetensors file)
  optim::save_training_checkpoint(path, lin, opt, 3);
  SafetensorsContent c = load_safetensors(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, t] : c.tensors) tensors.emplace_back(k, k == "epoch" ? Tensor::from_int64({-5}, {}) : t);
  save_safetensors(path, tensors, c.metadata);
  const auto w_before = lin.weight.to_vector();
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::load_training_checkpoint(path, lin, opt); }),
             Contains("'epoch'") && Contains(">= 0") && Contains("-5"));
  CHECK(lin.weight.to_vector() == w_before);
  std::filesystem::remove(path);
}

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

TEST_CASE("reliability: optimizer options changed through options() are validated at the next step",
          "[errors][reliability]") {
  Tensor w = Tensor::ones({2}, Dtype::Float64);
  w.requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.1});
  w.set_grad(Tensor::ones({2}, Dtype::Float64));
  sgd.options().lr = -1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { sgd.step(); }), Contains("learning rate") && Contains("-1"));
  CHECK(w.to_vector() == std::vector<double>{1, 1});
  sgd.options().lr = 0.1;
  sgd.options().momentum = kNaN;
  CHECK_THROWS_AS(sgd.step(), std::invalid_argument);
  CHECK(w.to_vector() == std::vector<double>{1, 1});

  optim::Adam adam({w});
  adam.options().betas.first = 1.5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { adam.step(); }), Contains("beta"));
  CHECK(w.to_vector() == std::vector<double>{1, 1});
}

TEST_CASE("reliability: optimizer state with a negative step or impossible values is refused when loaded",
          "[errors][reliability]") {
  SteppedAdam stepped;
  Tensor& w = stepped.w;
  optim::Adam& adam = stepped.adam;
  const auto good = adam.state_dict();
  auto with = [&](const std::string& key, Tensor t) {
    auto s = good;
    s.insert(key, t);
    return s;
  };
  CHECK_THAT(thrown<std::invalid_argument>([&] { adam.load_state_dict(with("state.0.step", Tensor::from_int64({-1}, {}))); }),
             Contains("state.0.step") && Contains("-1") && Contains(">= 0"));
  CHECK_THAT(thrown<std::invalid_argument>([&] {
               adam.load_state_dict(with("state.0.exp_avg_sq", Tensor::from_vector({-1, 0}, {2}, Dtype::Float64)));
             }),
             Contains("state.0.exp_avg_sq") && Contains(">= 0"));
  CHECK_THAT(thrown<std::invalid_argument>([&] {
               adam.load_state_dict(with("state.0.exp_avg", Tensor::from_vector({kNaN, 0}, {2}, Dtype::Float64)));
             }),
             Contains("state.0.exp_avg") && Contains("finite"));
  CHECK_THAT(thrown<std::invalid_argument>([&] {
               adam.load_state_dict(with("param_groups.0.lr", Tensor::scalar(-0.5, Dtype::Float64)));
             }),
             Contains("learning rate") && Contains("-0.5"));
  // nothing changed: the next step continues from step 1
  adam.load_state_dict(good);
  adam.step();
  CHECK(adam.state_dict().at("state.0.step").data<std::int64_t>()[0] == 2);

  optim::RMSprop rms({w});
  rms.step();
  auto rs = rms.state_dict();
  rs.insert("state.0.square_avg", Tensor::from_vector({-3, 1}, {2}, Dtype::Float64));
  CHECK_THAT(thrown<std::invalid_argument>([&] { rms.load_state_dict(rs); }),
             Contains("square_avg") && Contains(">= 0"));
}

TEST_CASE("reliability: a loaded step count or last_epoch too large to count on is refused when loaded",
          "[errors][reliability]") {
  SteppedAdam stepped;
  Tensor& w = stepped.w;
  optim::Adam& adam = stepped.adam;
  auto s = adam.state_dict();
  s.insert("state.0.step", Tensor::from_int64({std::numeric_limits<std::int64_t>::max()}, {}));  // ++ overflows
  CHECK_THAT(thrown<std::invalid_argument>([&] { adam.load_state_dict(s); }),
             Contains("state.0.step") && Contains("9223372036854775807") && Contains("<= 9007199254740992"));
  CHECK(adam.state_dict().at("state.0.step").data<std::int64_t>()[0] == 1);  // nothing was loaded

  optim::SGD sgd({w}, {.lr = 0.1});
  optim::CosineAnnealingLR cos(sgd, 10);
  cos.step();
  auto c = cos.state_dict();
  c.insert("last_epoch", Tensor::from_int64({std::int64_t{1} << 62}, {}));
  CHECK_THAT(thrown<std::invalid_argument>([&] { cos.load_state_dict(c); }),
             Contains("last_epoch") && Contains("4611686018427387904") && Contains("<= 1000000000"));
  CHECK(cos.last_epoch() == 1);
}
