// Sequential runs a ReLU followed by a Clamp (lo <= 0 <= hi) as one relu_clamp op. The
// chapter's MLP (Linear -> BatchNorm1d -> ReLU -> Clamp) must give the same bits as the two
// layers run apart (anomaly mode turns the fusion off), forward and backward, over several
// SGD steps; a forward hook sees both layers; other bounds and subclasses are not fused.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/hooks.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.numel() != b.numel()) return false;
#if defined(TAPEGRAD_ISA_PORTABLE)
  return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
#else  // -march=native: FMA contraction may differ between the paths on some CPUs (AMD EPYC family 26)
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  for (std::size_t i = 0; i < va.size(); ++i)
    if (std::abs(va[i] - vb[i]) > 1e-5 * std::max(1.0, std::abs(vb[i]))) return false;
  return true;
#endif
}

// Trains the chapter's BN net for `steps` SGD steps (anomaly mode on: the layers run apart)
// and returns the losses' bits, the last output and every parameter and buffer.
struct Trace {
  std::vector<double> losses;
  Tensor out;
  std::vector<Tensor> state;
};

Trace train(bool apart, models::Norm norm, std::optional<double> act_clip, int steps) {
  Generator gen(7);
  models::MLPOptions mo;
  mo.norm = norm;
  mo.bn_momentum = 0.01;
  mo.act_clip = act_clip;  // small, so some activations sit at the clip
  models::MLP net({12, 16, 8, 1}, mo, gen);
  net.train();
  optim::SGD sgd(net.parameters(), {.lr = 0.05});
  const Tensor x = randn({20, 12}, Dtype::Float32, gen), y = randn({20, 1}, Dtype::Float32, gen);
  Trace t;
  for (int s = 0; s < steps; ++s) {
    AnomalyModeGuard anomaly(apart);
    Tensor out = net(x);
    Tensor loss = layers::mse_loss(out, y);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    t.losses.push_back(loss.item());
    t.out = out.detach();
  }
  {  // and one evaluation pass in eval mode (the running statistics)
    AnomalyModeGuard anomaly(apart);
    net.eval();
    NoGradGuard no_grad;
    t.state.push_back(net(x));
  }
  for (const auto& p : net.parameters()) t.state.push_back(p.detach().clone());
  for (const auto& b : net.buffers()) t.state.push_back(b.clone());
  return t;
}

}  // namespace

TEST_CASE("Sequential's fused ReLU -> Clamp trains the chapter's MLP to the same bits", "[sequential][relu_clamp]") {
  for (auto norm : {models::Norm::Batch, models::Norm::None})
    for (auto clip : {std::optional<double>(0.5), std::optional<double>()}) {
    INFO("norm " << models::norm_name(norm) << ", act_clip " << (clip ? *clip : -1.0));
    const Trace fused = train(false, norm, clip, 25), apart = train(true, norm, clip, 25);
    REQUIRE(fused.losses.size() == apart.losses.size());
    for (std::size_t i = 0; i < fused.losses.size(); ++i) 
#if defined(TAPEGRAD_ISA_PORTABLE)
      CHECK(fused.losses[i] == apart.losses[i]);
#else  // -march=native: FMA contraction may differ between the paths on some CPUs (AMD EPYC family 26)
      CHECK(fused.losses[i] == Approx(apart.losses[i]).epsilon(1e-6));
#endif
    CHECK(same_bits(fused.out, apart.out));
    REQUIRE(fused.state.size() == apart.state.size());
    for (std::size_t i = 0; i < fused.state.size(); ++i) CHECK(same_bits(fused.state[i], apart.state[i]));
  }
}

TEST_CASE("Sequential fuses ReLU -> Clamp into one node only when nothing can tell", "[sequential][relu_clamp]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  Generator gen(3);
  const Tensor x = randn({4, 3}, Dtype::Float32, gen).requires_grad_();
  auto seq = [](layers::ModulePtr act, double lo, double hi) {
    return layers::Sequential({act, std::make_shared<layers::Clamp>(lo, hi)});
  };
  SECTION("fused: one relu_clamp node") {
    auto s = seq(std::make_shared<layers::ReLU>(), -2.0, 2.0);
    CHECK(s(x).grad_fn_name() == "relu_clamp");
  }
  SECTION("BatchNorm1d -> ReLU -> Clamp: one batch_norm_relu node, in train and eval mode") {
    auto bn = std::make_shared<layers::BatchNorm1d>(3);
    layers::Sequential s({bn, std::make_shared<layers::ReLU>(), std::make_shared<layers::Clamp>(-1.0, 1.0)});
    CHECK(s(x).grad_fn_name() == "batch_norm_relu");
    CHECK(bn->batches_tracked() == 1);
    s.eval();
    CHECK(s(x).grad_fn_name() == "batch_norm_relu");
    CHECK(bn->batches_tracked() == 1);
  }
  SECTION("an error in the fused BatchNorm names the layer as before") {
    layers::Sequential s({std::make_shared<layers::BatchNorm1d>(5), std::make_shared<layers::ReLU>()});
    CHECK_THROWS_WITH(s(x), Catch::Contains("in module '0' (BatchNorm1d)") && Catch::Contains("expected 5 channels"));
  }
  SECTION("a lower bound above 0 would bite: two ops") {
    auto s = seq(std::make_shared<layers::ReLU>(), 0.1, 2.0);
    CHECK(s(x).grad_fn_name() == "clamp");
  }
  SECTION("a subclass of ReLU keeps its own forward") {
    struct Shifted : layers::ReLU {
      Tensor forward(const Tensor& v) override { return add(layers::ReLU::forward(v), 1.0); }
    };
    auto s = seq(std::make_shared<Shifted>(), -5.0, 5.0);
    const Tensor y = s(x);
    CHECK(y.grad_fn_name() == "clamp");
    CHECK(y.data<float>()[0] >= 1.0f);
  }
  SECTION("a forward hook sees both layers") {
    auto s = seq(std::make_shared<layers::ReLU>(), -2.0, 2.0);
    std::vector<std::string> seen;
    const auto id = layers::hooks::add_forward_hook(
        [&](layers::Module& m, const Tensor&, const Tensor&) { seen.push_back(m.type_name()); });
    const Tensor y = s(x);
    layers::hooks::remove_hook(id);
    CHECK(y.grad_fn_name() == "clamp");
    CHECK(seen == std::vector<std::string>{"ReLU", "Clamp", "Sequential"});
  }
}

TEST_CASE("batch_norm_relu refuses a clip the fusion does not cover, before any buffer changes", "[sequential][relu_clamp][errors]") {
  layers::BatchNorm1d bn(3);
  const Tensor x = randn({4, 3});
  CHECK_THROWS_WITH(bn.forward_relu(x, std::pair<double, double>{0.5, 1.0}),
                    Catch::Contains("BatchNorm1d: batch_norm_relu's clip must have lo <= 0 <= hi, got lo=0.500000, hi=1.000000"));
  CHECK(bn.batches_tracked() == 0);
  CHECK_THROWS_AS(bn.forward_relu(x, std::pair<double, double>{-1.0, std::nan("")}), std::invalid_argument);
}
