// layers::fuse_modules rewrites BatchNorm1d -> ReLU [-> Clamp] into a BatchNorm1dReLU and
// ReLU -> Clamp (lo <= 0 <= hi) into a ReLUClamp, with Identity in the other places. The
// chapter's MLP must train to the same bits fused and unfused (float32 and float64, train
// and eval mode, with and without the clip), keep its state_dict keys and tensors, load an
// unfused checkpoint, and fold (fuse_batch_norm) to the same model; hooks and anomaly mode
// keep working on the fused modules; Sequential itself fuses nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/batch_norm_relu.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/clamp.h>
#include <tapegrad/layers/fuse_batch_norm.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/hooks.h>
#include <tapegrad/layers/identity.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/relu_clamp.h>
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

models::MLP make_mlp(models::Norm norm, std::optional<double> act_clip, Dtype dtype) {
  Generator gen(7);
  models::MLPOptions mo;
  mo.norm = norm;
  mo.bn_momentum = 0.01;
  mo.act_clip = act_clip;  // small, so some activations sit at the clip
  mo.dtype = dtype;
  return models::MLP({12, 16, 8, 1}, mo, gen);
}

// Trains the chapter's net for `steps` SGD steps, fused or not, and returns the losses, the
// last output, its input gradient, then the eval-mode output and every parameter and buffer.
struct Trace {
  std::vector<double> losses;
  Tensor out, dx;
  std::vector<Tensor> state;
  layers::FuseModulesReport report;
};

Trace train(bool fuse, models::Norm norm, std::optional<double> act_clip, Dtype dtype, int steps) {
  models::MLP net = make_mlp(norm, act_clip, dtype);
  Trace t;
  if (fuse) t.report = layers::fuse_modules(net);
  net.train();
  optim::SGD sgd(net.parameters(), {.lr = 0.05});
  Generator gen(8);
  const Tensor x = randn({20, 12}, dtype, gen), y = randn({20, 1}, dtype, gen);
  for (int s = 0; s < steps; ++s) {
    const Tensor xs = x.detach().requires_grad_();
    Tensor out = net(xs);
    Tensor loss = layers::mse_loss(out, y);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    t.losses.push_back(loss.item());
    t.out = out.detach();
    t.dx = xs.grad();
  }
  net.eval();
  {
    NoGradGuard no_grad;
    t.state.push_back(net(x));
  }
  for (const auto& p : net.parameters()) t.state.push_back(p.detach().clone());
  for (const auto& b : net.buffers()) t.state.push_back(b.clone());
  return t;
}

std::vector<std::string> keys(const layers::Module& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m.state_dict()) out.push_back(k);
  return out;
}

std::vector<std::string> child_types(const layers::Sequential& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size(); ++i) out.push_back(s[i]->type_name());
  return out;
}

}  // namespace

TEST_CASE("fuse_modules: the chapter's MLP trains to the same bits fused and unfused", "[fuse_modules]") {
  for (auto dtype : {Dtype::Float32, Dtype::Float64})
    for (auto norm : {models::Norm::Batch, models::Norm::None})
      for (auto clip : {std::optional<double>(0.5), std::optional<double>()}) {
        INFO(dtype_name(dtype) << ", norm " << models::norm_name(norm) << ", act_clip " << (clip ? *clip : -1.0));
        const Trace fused = train(true, norm, clip, dtype, 25), apart = train(false, norm, clip, dtype, 25);
        // two hidden layers: each one pattern, or none (norm none, no clip)
        const bool bn = norm == models::Norm::Batch;
        CHECK(fused.report.batch_norm_relu == (bn ? 2u : 0u));
        CHECK(fused.report.relu_clamp == (!bn && clip ? 2u : 0u));
        REQUIRE(fused.losses.size() == apart.losses.size());
        for (std::size_t i = 0; i < fused.losses.size(); ++i)
#if defined(TAPEGRAD_ISA_PORTABLE)
          CHECK(fused.losses[i] == apart.losses[i]);
#else
          CHECK(fused.losses[i] == Approx(apart.losses[i]).epsilon(1e-6));
#endif
        CHECK(same_bits(fused.out, apart.out));
        CHECK(same_bits(fused.dx, apart.dx));
        REQUIRE(fused.state.size() == apart.state.size());
        for (std::size_t i = 0; i < fused.state.size(); ++i) CHECK(same_bits(fused.state[i], apart.state[i]));
      }
}

TEST_CASE("fuse_modules: the patterns become one fused module and Identity, with one tape node", "[fuse_modules]") {
  ModeChecksPause pause;  // train-mode forwards that only look at the tape, never reaching a backward
  Generator gen(3);
  const Tensor x = randn({4, 3}, Dtype::Float32, gen).requires_grad_();
  SECTION("BatchNorm1d -> ReLU -> Clamp: a BatchNorm1dReLU with the clip, in train and eval mode") {
    auto bn = std::make_shared<layers::BatchNorm1d>(3);
    layers::Sequential s({bn, std::make_shared<layers::ReLU>(), std::make_shared<layers::Clamp>(-1.0, 1.0)});
    CHECK(s(x).grad_fn_name() == "clamp");  // Sequential alone runs its children as they are
    const auto r = layers::fuse_modules(s);
    CHECK(r.batch_norm_relu == 1);
    CHECK(r.relu_clamp == 0);
    CHECK(child_types(s) == std::vector<std::string>{"BatchNorm1dReLU", "Identity", "Identity"});
    auto* f = dynamic_cast<layers::BatchNorm1dReLU*>(s[0].get());
    REQUIRE(f != nullptr);
    REQUIRE(f->clip.has_value());
    CHECK(f->clip->first == -1.0);
    CHECK(f->clip->second == 1.0);
    CHECK(f->extra_repr() == "3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, clip=(-1, 1)");
    CHECK(s(x).grad_fn_name() == "batch_norm_relu");
    CHECK(f->batches_tracked() == 2);  // the old module's counter, shared
    CHECK(bn->batches_tracked() == 2);
    s.eval();
    CHECK(s(x).grad_fn_name() == "batch_norm_relu");
    CHECK(f->batches_tracked() == 2);
  }
  SECTION("ReLU -> Clamp: a ReLUClamp") {
    layers::Sequential s({std::make_shared<layers::ReLU>(), std::make_shared<layers::Clamp>(-2.0, 2.0)});
    CHECK(s(x).grad_fn_name() == "clamp");
    CHECK(layers::fuse_modules(s).relu_clamp == 1);
    CHECK(child_types(s) == std::vector<std::string>{"ReLUClamp", "Identity"});
    CHECK(s[0]->extra_repr() == "min=-2, max=2");
    CHECK(s(x).grad_fn_name() == "relu_clamp");
  }
  SECTION("nested Sequentials are fused too; a second pass changes nothing") {
    auto inner = std::make_shared<layers::Sequential>(
        std::initializer_list<layers::ModulePtr>{std::make_shared<layers::BatchNorm1d>(3), std::make_shared<layers::ReLU>()});
    layers::Sequential s({std::make_shared<layers::Linear>(3, 3), inner});
    s.eval();
    CHECK(layers::fuse_modules(s).batch_norm_relu == 1);
    CHECK(child_types(*inner) == std::vector<std::string>{"BatchNorm1dReLU", "Identity"});
    for (auto& [p, m] : s.named_modules()) CHECK(!m->is_training());  // the new modules take the old ones' mode
    const auto again = layers::fuse_modules(s);
    CHECK(again.batch_norm_relu + again.relu_clamp == 0);
  }
  SECTION("not fused: a Clamp whose bounds exclude 0, subclasses, a ReLU without a Clamp") {
    struct Shifted : layers::ReLU {
      Tensor forward(const Tensor& v) override { return add(layers::ReLU::forward(v), 1.0); }
    };
    struct MyBatchNorm : layers::BatchNorm1d {
      MyBatchNorm() : layers::BatchNorm1d(3) {}
    };
    layers::Sequential s({std::make_shared<layers::ReLU>(), std::make_shared<layers::Clamp>(0.1, 2.0),
                          std::make_shared<Shifted>(), std::make_shared<layers::Clamp>(-5.0, 5.0),
                          std::make_shared<MyBatchNorm>(), std::make_shared<layers::ReLU>()});
    const auto r = layers::fuse_modules(s);
    CHECK(r.batch_norm_relu + r.relu_clamp == 0);
    CHECK(child_types(s) == std::vector<std::string>{"ReLU", "Clamp", "ReLU", "Clamp", "BatchNorm1d", "ReLU"});
  }
  SECTION("an error in the fused BatchNorm names the layer") {
    layers::Sequential s({std::make_shared<layers::BatchNorm1d>(5), std::make_shared<layers::ReLU>()});
    layers::fuse_modules(s);
    CHECK_THROWS_WITH(s(x), Catch::Contains("in module '0' (BatchNorm1dReLU)") && Catch::Contains("expected 5 channels"));
  }
}

TEST_CASE("fuse_modules keeps the state_dict keys and tensors and loads an unfused checkpoint", "[fuse_modules]") {
  ModeChecksPause pause;  // train-mode forwards without a backward, on purpose
  models::MLP trained = make_mlp(models::Norm::Batch, 0.5, Dtype::Float32);
  Generator gen(11);
  const Tensor x = randn({6, 12}, Dtype::Float32, gen);
  trained(x);  // running statistics away from their initial values
  trained.eval();
  const std::string path = (std::filesystem::temp_directory_path() / "tapegrad_fuse_modules_old.safetensors").string();
  layers::save(trained, path);  // a checkpoint of the unfused model

  models::MLP fused = make_mlp(models::Norm::Batch, 0.5, Dtype::Float32);
  const std::vector<std::string> before = keys(fused);
  const Tensor w = fused[1]->parameters()[0];
  layers::fuse_modules(fused);
  CHECK(keys(fused) == before);
  CHECK(fused[1]->parameters()[0].raw_data() == w.raw_data());  // the same tensor, not a copy
  layers::load(fused, path);  // strict
  std::filesystem::remove(path);
  fused.eval();
  NoGradGuard no_grad;
  CHECK(same_bits(fused(x), trained(x)));
}

TEST_CASE("fuse_batch_norm folds a fused model to the unfused model's copy", "[fuse_modules][fuse]") {
  ModeChecksPause pause;  // untrained BatchNorm nets folded on purpose
  for (auto clip : {std::optional<double>(0.5), std::optional<double>()}) {
    models::MLP plain = make_mlp(models::Norm::Batch, clip, Dtype::Float64), fused = make_mlp(models::Norm::Batch, clip, Dtype::Float64);
    layers::fuse_modules(fused);
    plain.eval();
    fused.eval();
    layers::FuseReport rp, rf;
    const auto a = layers::fuse_batch_norm(plain, &rp), b = layers::fuse_batch_norm(fused, &rf);
    CHECK(rf.fused == rp.fused);
    CHECK(child_types(*b) == child_types(*a));
    CHECK(keys(*b) == keys(*a));
    Generator gen(5);
    const Tensor x = randn({4, 12}, Dtype::Float64, gen);
    CHECK(same_bits((*b)(x), (*a)(x)));
  }
}

TEST_CASE("fuse_modules: a forward hook sees the fused module's output; anomaly mode runs it", "[fuse_modules][hooks]") {
  ModeChecksPause pause;  // train-mode forwards without a backward, on purpose
  models::MLP plain = make_mlp(models::Norm::Batch, 0.5, Dtype::Float32), fused = make_mlp(models::Norm::Batch, 0.5, Dtype::Float32);
  layers::fuse_modules(fused);
  Generator gen(2);
  const Tensor x = randn({5, 12}, Dtype::Float32, gen);
  std::vector<std::string> seen;
  std::vector<Tensor> outs;
  const auto id = layers::hooks::add_forward_hook([&](layers::Module& m, const Tensor&, const Tensor& out) {
    seen.push_back(m.type_name());
    outs.push_back(out.detach());
  });
  plain(x);
  const std::vector<std::string> seen_plain = seen;
  const std::vector<Tensor> outs_plain = outs;
  seen.clear();
  outs.clear();
  fused(x);
  layers::hooks::remove_hook(id);
  CHECK(seen_plain == std::vector<std::string>{"Linear", "BatchNorm1d", "ReLU", "Clamp", "Linear", "BatchNorm1d", "ReLU",
                                               "Clamp", "Linear", "MLP"});
  CHECK(seen == std::vector<std::string>{"Linear", "BatchNorm1dReLU", "Identity", "Identity", "Linear", "BatchNorm1dReLU",
                                         "Identity", "Identity", "Linear", "MLP"});
  REQUIRE(outs.size() == outs_plain.size());
  CHECK(same_bits(outs[1], outs_plain[3]));  // the fused module's output is the Clamp's
  CHECK(same_bits(outs[3], outs_plain[3]));  // and passes through the Identity places
  CHECK(same_bits(outs.back(), outs_plain.back()));

  // anomaly mode: the fused op runs (and records under the fused module's name), same bits
  models::MLP a = make_mlp(models::Norm::Batch, 0.5, Dtype::Float32), b = make_mlp(models::Norm::Batch, 0.5, Dtype::Float32);
  layers::fuse_modules(b);
  const Tensor xa = x.detach().requires_grad_(), xb = x.detach().requires_grad_();
  Tensor ya, yb;
  {
    AnomalyModeGuard anomaly;
    ya = a(xa);
    yb = b(xb);
    sum(ya).backward();
    sum(yb).backward();
  }
  CHECK(same_bits(yb, ya));
  CHECK(same_bits(xb.grad(), xa.grad()));
}

TEST_CASE("the fused modules refuse a clip that does not contain 0", "[fuse_modules][errors]") {
  CHECK_THROWS_WITH(layers::BatchNorm1dReLU(3, {}, std::pair<double, double>{0.5, 1.0}),
                    "BatchNorm1dReLU: expected a clip with lo <= 0 <= hi, got lo=0.500000, hi=1.000000");
  CHECK_THROWS_AS(layers::BatchNorm1dReLU(3, {}, std::pair<double, double>{-1.0, std::nan("")}), std::invalid_argument);
  CHECK_THROWS_WITH(layers::ReLUClamp(-1.0, -0.5), "ReLUClamp: expected lo <= 0 <= hi, got lo=-1.000000, hi=-0.500000");
  CHECK_THROWS_AS(layers::ReLUClamp(std::nan(""), 1.0), std::invalid_argument);
}

TEST_CASE("batch_norm_relu refuses a clip the fusion does not cover, before any buffer changes", "[fuse_modules][errors]") {
  layers::BatchNorm1d bn(3);
  const Tensor x = randn({4, 3});
  CHECK_THROWS_WITH(bn.forward_relu(x, std::pair<double, double>{0.5, 1.0}),
                    Catch::Contains("BatchNorm1d: batch_norm_relu's clip must have lo <= 0 <= hi, got lo=0.500000, hi=1.000000"));
  CHECK(bn.batches_tracked() == 0);
  CHECK_THROWS_AS(bn.forward_relu(x, std::pair<double, double>{-1.0, std::nan("")}), std::invalid_argument);
}
