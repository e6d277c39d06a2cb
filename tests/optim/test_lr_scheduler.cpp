// optim/lr_scheduler.h against torch.optim.lr_scheduler (PyTorch 1.13), state round trips
// and argument checks.
#include <catch2/catch.hpp>

#include <functional>
#include <limits>
#include <memory>

#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/sgd.h>
#include "test_errors_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

using Make = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

// lr of group 0 after construction and after each of n steps. The torch reference is
//   opt = SGD([{"params": [p], "lr": 0.1}], lr=0.1); s = make(opt); lrs = [lr]
//   n x { opt.step(); s.step(); lrs.append(opt.param_groups[0]["lr"]) }
std::vector<double> run(const Make& make, int n, std::vector<double> base = {0.1}) {
  std::vector<optim::SGD::Group> groups;
  for (double lr : base) {
    optim::SGDOptions o;
    o.lr = lr;
    groups.push_back({{Tensor::zeros({1}, Dtype::Float64).requires_grad_()}, o});
  }
  optim::SGD opt(groups);
  auto s = make(opt);
  std::vector<double> lrs{opt.lr(0)};
  for (int i = 0; i < n; ++i) {
    opt.step();
    s->step();
    REQUIRE(s->get_last_lr()[0] == opt.lr(0));
    lrs.push_back(opt.lr(0));
  }
  return lrs;
}

void require_lrs(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("epoch " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(1e-15).margin(1e-18));
  }
}

}  // namespace

TEST_CASE("StepLR, MultiStepLR, ExponentialLR match torch", "[optim][sched]") {
  // lr_scheduler.StepLR(opt, 3, 0.5)
  require_lrs(run([](auto& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); }, 12),
              {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125, 0.00625});
  // lr_scheduler.MultiStepLR(opt, [2, 5, 5, 8], 0.5): a repeated milestone counts twice
  require_lrs(
      run([](auto& o) { return std::make_unique<optim::MultiStepLR>(o, std::vector<std::int64_t>{2, 5, 5, 8}, 0.5); },
          12),
      {0.1, 0.1, 0.05, 0.05, 0.05, 0.0125, 0.0125, 0.0125, 0.00625, 0.00625, 0.00625, 0.00625, 0.00625});
  // lr_scheduler.ExponentialLR(opt, 0.9)
  require_lrs(run([](auto& o) { return std::make_unique<optim::ExponentialLR>(o, 0.9); }, 12),
              {0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002,
               0.05904900000000002, 0.05314410000000002, 0.04782969000000002, 0.043046721000000024,
               0.03874204890000002, 0.03486784401000002, 0.03138105960900001, 0.028242953648100012});
}

TEST_CASE("CosineAnnealingLR matches torch, also past T_max", "[optim][sched]") {
  // lr_scheduler.CosineAnnealingLR(opt, 4, 0.01)
  require_lrs(run([](auto& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 4, 0.01); }, 12),
              {0.1, 0.08681980515339464, 0.05500000000000001, 0.023180194846605363, 0.01, 0.023180194846605363,
               0.05500000000000002, 0.08681980515339469, 0.10000000000000006, 0.0868198051533947,
               0.05500000000000005, 0.023180194846605412, 0.01});
  // Two groups with their own base lr: CosineAnnealingLR(opt, 5), lrs 0.1 and 0.03.
  std::vector<optim::SGD::Group> groups;
  for (double lr : {0.1, 0.03}) {
    optim::SGDOptions o;
    o.lr = lr;
    groups.push_back({{Tensor::zeros({1}, Dtype::Float64).requires_grad_()}, o});
  }
  optim::SGD opt(groups);
  optim::CosineAnnealingLR s(opt, 5);
  const std::vector<std::vector<double>> want = {
      {0.1, 0.03},
      {0.09045084971874738, 0.02713525491562421},
      {0.06545084971874737, 0.01963525491562421},
      {0.03454915028125263, 0.010364745084375787},
      {0.009549150281252633, 0.002864745084375789},
      {0.0, 0.0},
      {0.009549150281252628, 0.002864745084375788},
      {0.03454915028125265, 0.010364745084375793}};
  for (std::size_t e = 0; e < want.size(); ++e) {
    if (e > 0) s.step();
    INFO("epoch " << e);
    REQUIRE(opt.lr(0) == Approx(want[e][0]).epsilon(1e-15).margin(1e-18));
    REQUIRE(opt.lr(1) == Approx(want[e][1]).epsilon(1e-15).margin(1e-18));
  }
}

TEST_CASE("LinearWarmup is torch's LinearLR", "[optim][sched]") {
  // lr_scheduler.LinearLR(opt): start_factor 1/3, end_factor 1, total_iters 5
  require_lrs(run([](auto& o) { return std::make_unique<optim::LinearWarmup>(o); }, 12),
              {0.03333333333333333, 0.04666666666666667, 0.060000000000000005, 0.07333333333333335,
               0.08666666666666668, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1});
  // lr_scheduler.LinearLR(opt, 0.25, 1.0, 4)
  require_lrs(run([](auto& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 4); }, 8),
              {0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002, 0.10000000000000002,
               0.10000000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002});
}

TEST_CASE("scheduler state round trip continues the same schedule", "[optim][sched]") {
  optim::SGDOptions o;
  o.lr = 0.1;
  Tensor p = Tensor::zeros({1}, Dtype::Float64).requires_grad_();
  optim::SGD opt({p}, o);
  optim::CosineAnnealingLR s(opt, 6, 0.001);
  for (int i = 0; i < 4; ++i) s.step();
  const auto opt_state = opt.state_dict();
  const auto sched_state = s.state_dict();
  REQUIRE(sched_state.at("last_epoch").item() == 4);

  Tensor q = Tensor::zeros({1}, Dtype::Float64).requires_grad_();
  optim::SGD opt2({q}, o);
  optim::CosineAnnealingLR s2(opt2, 6, 0.001);
  opt2.load_state_dict(opt_state);
  s2.load_state_dict(sched_state);
  REQUIRE(s2.last_epoch() == 4);
  for (int i = 0; i < 5; ++i) {
    s.step();
    s2.step();
    REQUIRE(opt.lr(0) == opt2.lr(0));  // bitwise
  }
  optim::OptimizerState bad = sched_state;
  bad.insert("base_lrs", Tensor::from_vector({0.1, 0.2}, {2}, Dtype::Float64));
  REQUIRE_THROWS_WITH(s2.load_state_dict(bad), Catch::Contains("shape [1]") && Catch::Contains("got [2]"));
  bad = sched_state;
  bad.erase("last_epoch");
  REQUIRE_THROWS_WITH(s2.load_state_dict(bad), Catch::Contains("'last_epoch'"));
  REQUIRE(s2.last_epoch() == 9);
}

TEST_CASE("scheduler arguments are checked", "[optim][sched]") {
  Tensor p = Tensor::zeros({1}, Dtype::Float64).requires_grad_();
  optim::SGD opt({p}, {});
  REQUIRE_THROWS_WITH(optim::StepLR(opt, 0), Catch::Contains("step_size >= 1, got 0"));
  REQUIRE_THROWS_WITH(optim::CosineAnnealingLR(opt, 0), Catch::Contains("T_max >= 1, got 0"));
  REQUIRE_THROWS_WITH(optim::LinearWarmup(opt, 0.0), Catch::Contains("start_factor <= 1, got 0"));
  REQUIRE_THROWS_WITH(optim::LinearWarmup(opt, 0.5, 1.5), Catch::Contains("end_factor <= 1, got 1.5"));
  REQUIRE_THROWS_WITH(optim::MultiStepLR(opt, {3, -1}), Catch::Contains("milestones >= 0, got -1"));
}

TEST_CASE("scheduler last_epoch is bounded at load: INT64_MAX and -2 are refused", "[optim][sched][errors]") {
  // last_epoch saturates at INT64_MAX when stepped (core/counter.h); a loaded one must be an
  // epoch in [-1, 10^9], as a checkpoint's epoch.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  optim::SGDOptions o;
  o.lr = 0.1;
  Tensor p = Tensor::zeros({1}, Dtype::Float64).requires_grad_();
  optim::SGD opt({p}, o);
  optim::ExponentialLR s(opt, 0.5);
  optim::OptimizerState st = s.state_dict();
  st.insert("last_epoch", Tensor::from_int64({1000000000}, {}));
  s.load_state_dict(st);
  s.step();
  CHECK(s.last_epoch() == 1000000001);
  for (std::int64_t bad : {kMax, std::int64_t{-2}}) {
    st.insert("last_epoch", Tensor::from_int64({bad}, {}));
    REQUIRE_THROWS_WITH(s.load_state_dict(st), Catch::Contains("'last_epoch'") && Catch::Contains(">= -1") &&
                                                   Catch::Contains(std::to_string(bad)));
  }
  CHECK(s.last_epoch() == 1000000001);  // a refused load changes nothing
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
