// Reliability of modules and optimizers: Module::to converts a model (BatchNorm included)
// consistently and the optimizer state follows; options are validated where they are
// set (constructor or public field, checked at the next use) and where they are loaded.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_renorm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/group_norm.h>
#include <tapegrad/layers/instance_norm.h>
#include <tapegrad/layers/layer_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/rmsprop.h>
#include <tapegrad/optim/sgd.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
}

// ---- 11. Module::to --------------------------------------------------------------------

TEST_CASE("reliability: Module::to(Float64) converts BatchNorm and the optimizer state follows",
          "[errors][reliability]") {
  Generator gen(3);
  auto lin = std::make_shared<layers::Linear>(4, 3, true, Dtype::Float32, gen);
  auto bn = std::make_shared<layers::BatchNorm1d>(3);
  layers::Sequential model({lin, bn});
  optim::Adam adam(model.parameters(), {.lr = 0.1});
  const Tensor x32 = Tensor::from_vector({1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 0, 1}, {3, 4}, Dtype::Float32);
  sum(square(model.forward(x32))).backward();
  adam.step();  // float32 state exists now
  model.zero_grad();

  model.to(Dtype::Float64);
  for (auto& [n, t] : model.named_parameters()) CHECK(t.dtype() == Dtype::Float64);
  CHECK(bn->running_mean.dtype() == Dtype::Float64);
  CHECK(bn->running_var.dtype() == Dtype::Float64);
  CHECK(bn->num_batches_tracked.dtype() == Dtype::Int64);
  const Tensor x64 = x32.to(Dtype::Float64);
  Tensor y = model.forward(x64);  // accepted: the module is float64 now
  CHECK(y.dtype() == Dtype::Float64);
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn->forward(Tensor::ones({3, 3}, Dtype::Float32)); }),
             Contains("BatchNorm1d") && Contains("input dtype float32") && Contains("module's float64"));
  sum(square(y)).backward();
  adam.step();  // the float32 moments are converted, not refused
  const auto st = adam.state_dict();
  CHECK(st.at("state.0.exp_avg").dtype() == Dtype::Float64);
  CHECK(st.at("state.0.step").data<std::int64_t>()[0] == 2);
  bn->eval();
  CHECK(model.forward(x64).dtype() == Dtype::Float64);
  // and back to float32: still consistent
  model.to(Dtype::Float32);
  bn->train();
  model.zero_grad();
  sum(square(model.forward(x32))).backward();
  adam.step();
  CHECK(adam.state_dict().at("state.1.exp_avg_sq").dtype() == Dtype::Float32);
}

// ---- 12. options validated where they are set -------------------------------------------

TEST_CASE("reliability: norm options changed after construction are validated at the next forward",
          "[errors][reliability]") {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, Dtype::Float32);
  layers::BatchNorm1d bn(3);
  bn.options.momentum = 5.0;
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("momentum") && Contains("5"));
  CHECK(bn.batches_tracked() == 0);
  CHECK(bn.running_mean.to_vector() == std::vector<double>{0, 0, 0});
  bn.options.momentum = -0.1;
  CHECK_THROWS_AS(bn.forward(x), std::invalid_argument);
  bn.options.momentum = kNaN;
  CHECK_THROWS_AS(bn.forward(x), std::invalid_argument);
  bn.options.momentum = 0.1;
  bn.options.eps = -1e-5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("eps"));
  bn.options.eps = std::numeric_limits<double>::infinity();
  CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }), Contains("eps"));
  CHECK_THAT(thrown<std::invalid_argument>([] { layers::BatchNorm1d b(3, {.eps = kNaN}); }), Contains("eps"));
  CHECK_THAT(thrown<std::invalid_argument>([] { layers::BatchNorm1d b(3, {.eps = 1.0 / 0.0}); }), Contains("eps"));
  // the functional form refuses the same values
  CHECK_THAT(thrown<std::invalid_argument>([&] {
               layers::functional::batch_norm(x, bn.running_mean, bn.running_var, Tensor(), Tensor(), true, 5.0);
             }),
             Contains("momentum"));

  layers::BatchRenorm1d br(3);
  br.options.momentum = 2.0;
  CHECK_THAT(thrown<std::invalid_argument>([&] { br.forward(x); }), Contains("momentum"));
  br.options.momentum = 0.1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { br.set_clipping(0.5, 1.0); }), Contains("rmax"));

  const Tensor x3 = Tensor::ones({2, 3, 4});
  layers::InstanceNorm1d in(3);
  in.options.eps = -1;
  CHECK_THAT(thrown<std::invalid_argument>([&] { in.forward(x3); }), Contains("eps"));
  in.options.eps = 1e-5;
  in.options.momentum = 1.5;
  CHECK_THAT(thrown<std::invalid_argument>([&] { in.forward(x3); }), Contains("momentum"));

  layers::LayerNorm ln({3});
  ln.eps = kNaN;
  CHECK_THAT(thrown<std::invalid_argument>([&] { ln.forward(x); }), Contains("eps"));
  layers::GroupNorm gn(1, 3);
  gn.eps = -2;
  CHECK_THAT(thrown<std::invalid_argument>([&] { gn.forward(x3); }), Contains("eps"));
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
  Tensor w = Tensor::ones({2}, Dtype::Float64);
  w.requires_grad_();
  optim::Adam adam({w});
  w.set_grad(Tensor::ones({2}, Dtype::Float64));
  adam.step();
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

TEST_CASE("reliability: scheduler options and loaded scheduler state are validated", "[errors][reliability]") {
  Tensor w = Tensor::ones({2}, Dtype::Float64);
  w.requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.1});
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::StepLR s(sgd, 2, -0.5); }), Contains("gamma") && Contains("-0.5"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::ExponentialLR s(sgd, kNaN); }), Contains("gamma"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::MultiStepLR s(sgd, {1, 2}, -1.0); }), Contains("gamma"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::CosineAnnealingLR s(sgd, 10, -1.0); }), Contains("eta_min"));
  CHECK(sgd.lr(0) == 0.1);
  optim::CosineAnnealingLR cos(sgd, 10);
  cos.step();
  auto good = cos.state_dict();
  auto bad_epoch = good;
  bad_epoch.insert("last_epoch", Tensor::from_int64({-5}, {}));
  CHECK_THAT(thrown<std::invalid_argument>([&] { cos.load_state_dict(bad_epoch); }),
             Contains("last_epoch") && Contains("-5"));
  auto bad_lr = good;
  bad_lr.insert("base_lrs", Tensor::from_vector({-0.1}, {1}, Dtype::Float64));
  CHECK_THAT(thrown<std::invalid_argument>([&] { cos.load_state_dict(bad_lr); }), Contains("base_lrs") && Contains("-0.1"));
  CHECK(cos.last_epoch() == 1);
  cos.load_state_dict(good);
}

TEST_CASE("reliability: a loaded step count or last_epoch too large to count on is refused when loaded",
          "[errors][reliability]") {
  Tensor w = Tensor::ones({2}, Dtype::Float64);
  w.requires_grad_();
  optim::Adam adam({w});
  w.set_grad(Tensor::ones({2}, Dtype::Float64));
  adam.step();
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
