// optim/: RMSprop, maximize and parameter groups against PyTorch 1.13; optimizer
// state_dict round trips and their errors; PyTorch's argument checks; buffers never
// touched by step(); step hooks; gradient clipping against torch.nn.utils.
// (SGD/Adam/AdamW trajectories are checked by the golden runner, "[golden]".)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/random.h>
#include <tapegrad/optim/step_hooks.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/optim.h>
#include "test_support.h"

using namespace tapegrad;
using tapegrad::test::require_close;

namespace {

Tensor param(const std::vector<double>& v, Dtype dtype = Dtype::Float64) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}, dtype).requires_grad_();
}

// The gradient of step t (0-based) used by every torch reference below:
//   torch.tensor([0.3*(t+1), -0.7, 1.5/(t+1), 0.05*t - 0.1])
Tensor grad_at(int t, Dtype dtype = Dtype::Float64) {
  return Tensor::from_vector({0.3 * (t + 1), -0.7, 1.5 / (t + 1), 0.05 * t - 0.1}, {4}, dtype);
}

// Runs 5 steps from p0 = [0.5, -1.25, 2.0, 0.0] and returns the parameter.
template <class Opt, class Options>
std::pair<Tensor, std::shared_ptr<Opt>> five_steps(Options o, Dtype dtype = Dtype::Float64) {
  Tensor p = param({0.5, -1.25, 2.0, 0.0}, dtype);
  auto opt = std::make_shared<Opt>(std::vector<Tensor>{p}, o);
  for (int t = 0; t < 5; ++t) {
    p.set_grad(grad_at(t, dtype));
    opt->step();
  }
  return {p, opt};
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

// References: /usr/bin/python3, torch 1.13, float64:
//   p = torch.tensor([0.5, -1.25, 2.0, 0.0], requires_grad=True); opt = cls([p], **kw)
//   5 x { p.grad = grad_at(t); opt.step() }; print(p.tolist(), opt.state[p])
TEST_CASE("RMSprop matches torch.optim.RMSprop", "[optim]") {
  SECTION("defaults, lr=0.01") {
    optim::RMSpropOptions o;
    o.lr = 0.01;
    auto [p, opt] = five_steps<optim::RMSprop>(o);
    require_close(p, {0.0891169711118976, -0.9255394732756687, 1.788248353528299, 0.03971729541439632});
    auto sd = opt->state_dict();
    require_close(sd.at("state.0.square_avg"),
                  {0.04905242280900004, 0.024014875549000017, 0.03181377960000003, 0.0002450670760000002});
    REQUIRE(sd.at("state.0.step").dtype() == Dtype::Int64);
    REQUIRE(sd.at("state.0.step").item() == 5);
  }
  SECTION("momentum=0.9, weight_decay=0.1, alpha=0.9") {
    optim::RMSpropOptions o;
    o.lr = 0.01, o.momentum = 0.9, o.weight_decay = 0.1, o.alpha = 0.9;
    auto [p, opt] = five_steps<optim::RMSprop>(o);
    require_close(p, {0.13790333652355602, -0.9424541581028387, 1.758239295592786, 0.11612063447697399});
    require_close(opt->state_dict().at("state.0.momentum_buffer"),
                  {10.51091617377175, -8.35317225146757, 5.838282565079744, 0.9121057661652616});
  }
  SECTION("centered, lr=0.02, eps=1e-6") {
    optim::RMSpropOptions o;
    o.lr = 0.02, o.centered = true, o.eps = 1e-6;
    auto [p, opt] = five_steps<optim::RMSprop>(o);
    require_close(p, {-0.3317532744103012, -0.5925388123369366, 1.572706680856088, 0.0809819362613364});
    require_close(opt->state_dict().at("state.0.grad_avg"),
                  {0.04440448203000004, -0.03430696507000003, 0.03329918265000003, 4.925449000000047e-05});
  }
  SECTION("centered, momentum=0.5, maximize") {
    optim::RMSpropOptions o;
    o.lr = 0.02, o.centered = true, o.momentum = 0.5, o.maximize = true;
    auto [p, opt] = five_steps<optim::RMSprop>(o);
    require_close(p, {1.874914737122182, -2.36097866181825, 2.760329780704669, -0.30729422769431775});
  }
}

TEST_CASE("maximize flips the gradient as in PyTorch (SGD, Adam)", "[optim]") {
  // torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True)
  optim::SGDOptions s;
  s.lr = 0.1, s.momentum = 0.9, s.weight_decay = 0.01, s.maximize = true;
  auto [p, sgd] = five_steps<optim::SGD>(s);
  require_close(p, {1.4430183606863292, -2.1515269760338187, 3.0792359309823487, -0.03843430801901001});
  require_close(sgd->state_dict().at("state.0.momentum_buffer"),
                {-3.9135461806582947, 2.8035857797756876, -2.47394854530348, -0.04396453970989999});
  // torch.optim.Adam([p], lr=0.01, weight_decay=0.01, maximize=True)
  optim::AdamOptions a;
  a.lr = 0.01, a.weight_decay = 0.01, a.maximize = true;
  auto [q, adam] = five_steps<optim::Adam>(a);
  require_close(q, {0.5484771757984965, -1.2999993684921538, 2.043795974975654, -0.02798975680852379});
  require_close(adam->state_dict().at("state.0.exp_avg_sq"),
                {0.00489835989581862, 0.002357186092774164, 0.003146461706808773, 2.5025780106787343e-05});
}

TEST_CASE("Adam in float32 follows the float64 trajectory", "[optim]") {
  optim::AdamOptions a;
  a.lr = 0.01, a.amsgrad = true;
  auto [p32, o32] = five_steps<optim::Adam>(a, Dtype::Float32);
  auto [p64, o64] = five_steps<optim::Adam>(a, Dtype::Float64);
  REQUIRE(p32.dtype() == Dtype::Float32);
  require_close(p32, p64.to_vector(), 1e-5);
}

TEST_CASE("parameter groups keep their own lr (torch param_groups)", "[optim]") {
  // torch.optim.SGD([{"params":[a]}, {"params":[b], "lr":0.5}], lr=0.1, momentum=0.9);
  // 3 x { a.grad = [0.1*(t+1), -0.2]; b.grad = [0.3]; step }
  Tensor a = param({1.0, 2.0}), b = param({-1.0});
  optim::SGDOptions o;
  o.lr = 0.1, o.momentum = 0.9;
  optim::SGDOptions head = o;
  head.lr = 0.5;
  optim::SGD opt({{{a}, o}, {{b}, head}});
  REQUIRE(opt.num_param_groups() == 2);
  REQUIRE(opt.lr(1) == 0.5);
  for (int t = 0; t < 3; ++t) {
    a.set_grad(Tensor::from_vector({0.1 * (t + 1), -0.2}, {2}, Dtype::Float64));
    b.set_grad(Tensor::from_vector({0.3}, {1}, Dtype::Float64));
    opt.step();
  }
  require_close(a, {0.9048999999999999, 2.1121999999999996});
  require_close(b, {-1.8415000000000001});
}

TEST_CASE("invalid hyper-parameters throw std::invalid_argument naming the value (PyTorch's checks)", "[optim]") {
  Tensor p = param({1.0});
  auto sgd = [&](auto edit) {
    optim::SGDOptions o;
    edit(o);
    return optim::SGD({p}, o);
  };
  REQUIRE_THROWS_WITH(sgd([](auto& o) { o.lr = -0.5; }), Catch::Contains("learning rate -0.5"));
  REQUIRE_THROWS_WITH(sgd([](auto& o) { o.momentum = -0.25; }), Catch::Contains("momentum -0.25"));
  REQUIRE_THROWS_WITH(sgd([](auto& o) { o.weight_decay = -1; }), Catch::Contains("weight_decay -1"));
  REQUIRE_THROWS_WITH(sgd([](auto& o) { o.nesterov = true; }), Catch::Contains("nesterov"));
  REQUIRE_THROWS_WITH(sgd([](auto& o) { o.nesterov = true, o.momentum = 0.9, o.dampening = 0.1; }),
                      Catch::Contains("dampening 0.1"));
  REQUIRE_THROWS_AS(sgd([](auto& o) { o.lr = std::nan(""); }), std::invalid_argument);
  REQUIRE_NOTHROW(sgd([](auto& o) { o.momentum = 1.5; }));  // PyTorch accepts momentum > 1

  auto adam = [&](auto edit) {
    optim::AdamOptions o;
    edit(o);
    return optim::Adam({p}, o);
  };
  REQUIRE_THROWS_WITH(adam([](auto& o) { o.lr = -1e-3; }), Catch::Contains("learning rate -0.001"));
  REQUIRE_THROWS_WITH(adam([](auto& o) { o.eps = -1e-8; }), Catch::Contains("epsilon"));
  REQUIRE_THROWS_WITH(adam([](auto& o) { o.betas = {1.0, 0.999}; }), Catch::Contains("beta at index 0: 1 (expected in [0, 1))"));
  REQUIRE_THROWS_WITH(adam([](auto& o) { o.betas = {0.9, -0.1}; }), Catch::Contains("beta at index 1: -0.1"));
  REQUIRE_THROWS_WITH(adam([](auto& o) { o.weight_decay = -0.01; }), Catch::Contains("weight_decay -0.01"));
  optim::AdamWOptions w;
  w.betas = {0.9, 1.0};
  REQUIRE_THROWS_WITH(optim::AdamW({p}, w), Catch::StartsWith("AdamW: invalid beta at index 1"));
  REQUIRE(optim::AdamWOptions{}.weight_decay == 0.01);  // torch.optim.AdamW default

  optim::RMSpropOptions r;
  r.alpha = -0.5;
  REQUIRE_THROWS_WITH(optim::RMSprop({p}, r), Catch::Contains("alpha -0.5"));

  optim::SGD ok({p}, {});
  REQUIRE_THROWS_WITH(ok.set_lr(0, -2.0), Catch::Contains("learning rate -2"));
  REQUIRE(ok.lr(0) == 0.01);
}

TEST_CASE("parameters must be float leaves in a single group", "[optim]") {
  Tensor p = param({1.0, 2.0});
  REQUIRE_THROWS_WITH(optim::SGD({Tensor::from_int64({1}, {1})}, {}), Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(optim::SGD({p, p}, {}), Catch::Contains("more than one parameter group"));
  Tensor q = param({3.0});
  Tensor nonleaf = [&] {
    EnableGradGuard eg;
    Tensor t = q.to(Dtype::Float32);
    return t;
  }();
  REQUIRE_THROWS_WITH(optim::SGD({nonleaf}, {}), Catch::Contains("not a leaf"));
  optim::SGD two({p}, {});
  REQUIRE_THROWS_WITH(two.add_param_group({p}, {}), Catch::Contains("more than one parameter group"));
  // A gradient of the wrong shape is reported at step().
  Tensor r = param({1.0, 2.0, 3.0});
  optim::SGD s({r}, {});
  r.impl()->autograd->grad = Tensor::zeros({2}, Dtype::Float64);
  REQUIRE_THROWS_WITH(s.step(), Catch::Contains("[3] float64 but its grad is [2] float64"));
}

TEST_CASE("zero_grad clears or zeroes every group's gradients", "[optim]") {
  Tensor a = param({1.0}), b = param({2.0});
  optim::SGDOptions o;
  optim::SGD opt({{{a}, o}, {{b}, o}});
  a.set_grad(Tensor::from_vector({5.0}, {1}, Dtype::Float64));
  b.set_grad(Tensor::from_vector({6.0}, {1}, Dtype::Float64));
  opt.zero_grad(false);
  REQUIRE(a.grad().defined());
  REQUIRE(a.grad().item() == 0.0);
  REQUIRE(b.grad().item() == 0.0);
  opt.zero_grad();
  REQUIRE_FALSE(a.grad().defined());
  REQUIRE_FALSE(b.grad().defined());
  // Parameters without a gradient are skipped by step().
  opt.step();
  REQUIRE(a.item() == 1.0);
}

TEST_CASE("every step() runs the step hooks first with its parameters", "[optim]") {
  Tensor a = param({1.0}), b = param({2.0, 3.0});
  std::vector<std::size_t> seen;
  double a_at_hook = 0;
  const auto id = optim::hooks::add_step_hook([&](const std::vector<Tensor>& ps) {
    seen.push_back(ps.size());
    a_at_hook = ps[0].item();
  });
  a.set_grad(Tensor::from_vector({1.0}, {1}, Dtype::Float64));
  b.set_grad(Tensor::from_vector({1.0, 1.0}, {2}, Dtype::Float64));
  optim::SGDOptions so;
  so.lr = 0.5;
  optim::SGD(std::vector<Tensor>{a, b}, so).step();
  optim::Adam({a, b}, {}).step();
  optim::AdamW({a, b}, {}).step();
  optim::RMSprop({a, b}, {}).step();
  optim::hooks::remove_step_hook(id);
  REQUIRE(seen == std::vector<std::size_t>{2, 2, 2, 2});
  REQUIRE(a_at_hook != 1.0);  // the last hook saw parameters already moved by earlier steps
  optim::SGD(std::vector<Tensor>{a}, so).step();
  REQUIRE(seen.size() == 4);  // removed
}

TEST_CASE("buffers are never parameters: step() leaves BN running stats unchanged", "[optim]") {
  Generator gen(7);
  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  mo.dtype = Dtype::Float64;
  models::MLP model({3, 5, 2}, mo, gen);
  const auto params = model.parameters();
  REQUIRE(params.size() == model.named_parameters().size());
  for (auto& p : params) {
    REQUIRE(is_floating(p.dtype()));
    for (auto& [name, b] : model.named_buffers()) REQUIRE_FALSE(p.shares_storage_with(b));
  }
  optim::SGDOptions o;
  o.lr = 0.1, o.momentum = 0.9, o.weight_decay = 0.1;
  optim::SGD sgd(params, o);
  optim::Adam adam(model.parameters(), {});
  for (int step = 0; step < 3; ++step) {
    model.train();
    model.zero_grad();
    Tensor x = randn({6, 3}, Dtype::Float64, gen);
    Tensor loss = layers::mse_loss(model(x), Tensor::zeros({6, 2}, Dtype::Float64));
    loss.backward();
    std::vector<Tensor> before;
    for (auto& [name, b] : model.named_buffers()) before.push_back(b.clone());
    std::vector<Tensor> params_before;
    for (auto& p : params) params_before.push_back(p.clone());
    (step % 2 ? static_cast<optim::Optimizer&>(adam) : sgd).step();
    std::size_t i = 0;
    for (auto& [name, b] : model.named_buffers()) {
      INFO(name);
      REQUIRE(bitwise_equal(b, before[i++]));
    }
    REQUIRE_FALSE(bitwise_equal(params[0], params_before[0]));  // the step did update weights
  }
  REQUIRE(model.state_dict().at("1.num_batches_tracked").item() == 3);
}

TEST_CASE("optimizer state_dict round trip resumes bit for bit", "[optim]") {
  for (int kind = 0; kind < 4; ++kind) {
    INFO("optimizer kind " << kind);
    auto make = [&](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
      if (kind == 0) {
        optim::SGDOptions o;
        o.momentum = 0.9, o.nesterov = true, o.lr = 0.05;
        return std::make_unique<optim::SGD>(ps, o);
      }
      if (kind == 1) {
        optim::AdamOptions o;
        o.amsgrad = true, o.weight_decay = 0.1;
        return std::make_unique<optim::Adam>(ps, o);
      }
      if (kind == 2) return std::make_unique<optim::AdamW>(ps);
      optim::RMSpropOptions o;
      o.centered = true, o.momentum = 0.3;
      return std::make_unique<optim::RMSprop>(ps, o);
    };
    Tensor a = param({0.5, -1.25, 2.0, 0.0});
    auto opt = make({a});
    for (int t = 0; t < 3; ++t) {
      a.set_grad(grad_at(t));
      opt->step();
    }
    opt->set_lr(0, 0.002);  // a changed group option must travel with the state
    const optim::OptimizerState sd = opt->state_dict();
    REQUIRE(sd.at("param_groups.0.lr").item() == 0.002);
    REQUIRE(sd.at("param_groups.0.params").to_vector() == std::vector<double>{0});
    Tensor b = a.detach().clone().requires_grad_();
    auto resumed = make({b});
    resumed->load_state_dict(sd);
    REQUIRE(resumed->lr(0) == 0.002);
    for (int t = 3; t < 5; ++t) {
      a.set_grad(grad_at(t));
      opt->step();
      b.set_grad(grad_at(t));
      resumed->step();
    }
    REQUIRE(bitwise_equal(a, b));
    const auto s1 = opt->state_dict(), s2 = resumed->state_dict();
    REQUIRE(s1.keys() == s2.keys());
    for (auto& [k, v] : s1) REQUIRE(bitwise_equal(v, s2.at(k)));
  }
}

TEST_CASE("optimizer load_state_dict rejects bad state and changes nothing", "[optim]") {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  optim::AdamOptions o;
  optim::Adam opt({a, b}, o);
  a.set_grad(Tensor::from_vector({0.1, 0.2}, {2}, Dtype::Float64));
  b.set_grad(Tensor::from_vector({0.3}, {1}, Dtype::Float64));
  opt.step();
  const auto good = opt.state_dict();

  auto expect_error = [&](const optim::OptimizerState& bad, const std::string& text) {
    INFO(text);
    REQUIRE_THROWS_WITH(opt.load_state_dict(bad), Catch::Contains(text) && Catch::Contains("nothing was loaded"));
    const auto now = opt.state_dict();
    for (auto& [k, v] : good) REQUIRE(bitwise_equal(v, now.at(k)));
  };
  auto with = [&](const std::string& key, const Tensor& t) {
    optim::OptimizerState s = good;
    s.insert(key, t);
    return s;
  };
  expect_error(with("state.0.exp_avg", Tensor::zeros({3}, Dtype::Float64)),
               "'state.0.exp_avg': expected [2] float64, got [3] float64");
  expect_error(with("state.1.exp_avg", Tensor::zeros({1}, Dtype::Float32)),
               "'state.1.exp_avg': expected [1] float64, got [1] float32");
  expect_error(with("state.2.exp_avg", Tensor::zeros({1}, Dtype::Float64)), "parameter 2 does not exist");
  expect_error(with("state.0.momentum_buffer", Tensor::zeros({2}, Dtype::Float64)),
               "Adam has no state named 'momentum_buffer'");
  expect_error(with("state.0.step", Tensor::scalar(1.0, Dtype::Float64)), "'state.0.step': expected an int64 scalar");
  expect_error(with("param_groups.1.lr", Tensor::scalar(0.1, Dtype::Float64)), "the optimizer has 1 groups");
  expect_error(with("param_groups.0.momentum", Tensor::scalar(0.1, Dtype::Float64)), "Adam has no option named 'momentum'");
  expect_error(with("param_groups.0.beta1", Tensor::scalar(1.5, Dtype::Float64)), "beta at index 0: 1.5");
  expect_error(with("param_groups.0.params", Tensor::from_int64({0}, {1})), "group 0 holds 2 parameters");
  expect_error(with("something", Tensor::scalar(1.0, Dtype::Float64)), "unexpected key 'something'");
  optim::OptimizerState missing = good;
  missing.erase("param_groups.0.eps");
  expect_error(missing, "missing key 'param_groups.0.eps'");
  // An SGD state dict is not an Adam one.
  optim::SGD sgd({param({1.0, 2.0}), param({3.0})}, {});
  REQUIRE_THROWS_WITH(opt.load_state_dict(sgd.state_dict()), Catch::Contains("Adam has no option named 'momentum'"));
}

// References: torch.nn.utils.clip_grad_norm_([x, y], 5.0, norm_type=nt) with
// x.grad = [[3, -4], [1, 2]], y.grad = [0.5, -12] (float64).
TEST_CASE("clip_grad_norm_ and clip_grad_value_ match torch.nn.utils", "[optim]") {
  auto make = [] {
    Tensor x = Tensor::from_vector({3, -4, 1, 2}, {2, 2}, Dtype::Float64).requires_grad_();
    Tensor y = Tensor::from_vector({0.5, -12}, {2}, Dtype::Float64).requires_grad_();
    x.set_grad(Tensor::from_vector({3, -4, 1, 2}, {2, 2}, Dtype::Float64));
    y.set_grad(Tensor::from_vector({0.5, -12}, {2}, Dtype::Float64));
    return std::vector<Tensor>{x, y};
  };
  struct Case {
    double norm_type, total;
    std::vector<double> gx, gy;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {2.0, 13.200378782444085,
       {1.1363309425346482, -1.5151079233795308, 0.3787769808448827, 0.7575539616897654},
       {0.18938849042244135, -4.545323770138593}},
      {1.0, 22.5, {0.6666666370370384, -0.8888888493827178, 0.22222221234567946, 0.4444444246913589},
       {0.11111110617283973, -2.6666665481481537}},
      {3.0, 12.227433116271866,
       {1.2267496072653947, -1.6356661430205264, 0.4089165357551316, 0.8178330715102632},
       {0.2044582678775658, -4.906998429061579}},
      {inf, 12.0, {1.249999895833342, -1.6666665277777895, 0.41666663194444736, 0.8333332638888947},
       {0.20833331597222368, -4.999999583333368}},
  };
  for (const auto& c : cases) {
    INFO("norm_type " << c.norm_type);
    auto ps = make();
    REQUIRE(optim::clip_grad_norm_(ps, 5.0, c.norm_type) == Approx(c.total).epsilon(1e-14));
    require_close(ps[0].grad(), c.gx, 1e-14);
    require_close(ps[1].grad(), c.gy, 1e-14);
  }
  auto ps = make();  // below max_norm: unchanged, total returned
  REQUIRE(optim::clip_grad_norm_(ps, 100.0) == Approx(13.200378782444085).epsilon(1e-14));
  require_close(ps[1].grad(), {0.5, -12});

  ps = make();  // torch.nn.utils.clip_grad_value_([x, y], 2.5)
  optim::clip_grad_value_(ps, 2.5);
  require_close(ps[0].grad(), {2.5, -2.5, 1.0, 2.0});
  require_close(ps[1].grad(), {0.5, -2.5});

  ps = make();
  ps[1].grad().data<double>()[0] = std::nan("");
  REQUIRE_THROWS_WITH(optim::clip_grad_norm_(ps, 1.0, 2.0, true), Catch::Contains("non-finite"));
  REQUIRE(ps[0].grad().at(0) == 3.0);  // unchanged
  REQUIRE(optim::clip_grad_norm_({param({1.0})}, 1.0) == 0.0);  // no gradients
  REQUIRE_THROWS_AS(optim::clip_grad_norm_(make(), -1.0), std::invalid_argument);
  REQUIRE_THROWS_AS(optim::clip_grad_value_(make(), -1.0), std::invalid_argument);
}
