// fuse_batch_norm: BatchNorm folded into the Linear / Conv2d before it gives the unfused
// model's eval outputs on every model of models/, in float32 and float64.
#include <catch2/catch.hpp>

#include <tapegrad/core/core.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/fuse_batch_norm.h>
#include <tapegrad/layers/fuse_clone.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/models/mlp.h>
#include "test_support.h"

using namespace tapegrad;
using tapegrad::test::require_close;

namespace {

// Gives every BatchNorm non-trivial statistics and affine parameters: a few train-mode
// batches of shifted, scaled inputs, then random γ, β.
void warm_up(layers::Module& m, const Shape& in, Dtype dt, Generator& gen) {
  tapegrad::ModeChecksPause pause;  // statistics warmed up without gradients on purpose
  m.train();
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn(in, dt, gen);
    NoGradGuard ng;
    x.mul_(2.0);
    x.add_(Tensor::full(in, 0.5, dt));
    m(x);
  }
  for (auto& [name, p] : m.named_parameters()) {
    NoGradGuard ng;
    if (name.find("weight") != std::string::npos && p.dim() == 1) p.copy_(uniform(p.shape(), 0.5, 1.5, dt, gen));
    if (name.find("bias") != std::string::npos && p.dim() == 1) p.copy_(uniform(p.shape(), -0.5, 0.5, dt, gen));
  }
  m.eval();
}

std::size_t count_type(layers::Module& m, const std::string& type) {
  std::size_t n = 0;
  for (const auto& [path, mod] : m.named_modules()) n += mod->type_name() == type;
  return n;
}

void check_fused(layers::Module& model, const Shape& in_shape, Dtype dt, std::size_t want_fused, Generator& gen) {
  const double tol = dt == Dtype::Float32 ? 1e-5 : 1e-12;
  const auto before = model.state_dict();
  std::vector<std::vector<double>> before_values;
  for (const auto& [k, v] : before) before_values.push_back(v.to_vector());
  layers::FuseReport report;
  auto fused = layers::fuse_batch_norm(model, &report);
  REQUIRE(report.fused == want_fused);
  REQUIRE(count_type(*fused, "BatchNorm1d") + count_type(*fused, "BatchNorm2d") ==
          count_type(model, "BatchNorm1d") + count_type(model, "BatchNorm2d") - want_fused);
  REQUIRE_FALSE(fused->is_training());
  for (std::int64_t batch : {1, 5}) {
    Shape s = in_shape;
    s[0] = batch;
    Tensor x = randn(s, dt, gen);
    NoGradGuard ng;
    Tensor want = model(x);
    Tensor got = (*fused)(x);
    require_close(got, want, tol);
  }
  // the original is untouched
  std::size_t i = 0;
  for (const auto& [k, v] : model.state_dict()) REQUIRE(v.to_vector() == before_values[i++]);
}

}  // namespace

TEST_CASE("fuse_batch_norm folds a worked example", "[fuse]") {
  // Linear(1 -> 1) w = 2, b = 1; BatchNorm1d(eps 0) γ = 3, β = 0.5, mean 1, var 4:
  // s = 3/2, W' = 3, b' = 1.5·(1 - 1) + 0.5 = 0.5.
  layers::BatchNormOptions bo;
  bo.eps = 0.0;
  bo.dtype = Dtype::Float64;
  auto lin = std::make_shared<layers::Linear>(1, 1, true, Dtype::Float64);
  auto bn = std::make_shared<layers::BatchNorm1d>(1, bo);
  {
    NoGradGuard ng;
    lin->weight.fill_(2.0);
    lin->bias.fill_(1.0);
    bn->weight.fill_(3.0);
    bn->bias.fill_(0.5);
    bn->running_mean.fill_(1.0);
    bn->running_var.fill_(4.0);
  }
  layers::Sequential net{lin, bn};
  net.eval();
  auto fused = layers::fuse_batch_norm(net);
  REQUIRE(fused->size() == 1);
  auto f = std::dynamic_pointer_cast<layers::Linear>((*fused)[0]);
  REQUIRE(f);
  REQUIRE(f->weight.item() == 3.0);
  REQUIRE(f->bias.item() == 0.5);
  NoGradGuard ng;
  require_close((*fused)(Tensor::from_vector({2.0}, {1, 1}, Dtype::Float64)), {6.5});
}

TEST_CASE("fuse_batch_norm matches every MLP of models/", "[fuse]") {
  for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
    for (models::Norm norm : {models::Norm::None, models::Norm::Batch, models::Norm::Layer, models::Norm::Group}) {
      INFO(dtype_name(dt) << " norm=" << models::norm_name(norm));
      Generator gen(7);
      models::MLPOptions o;
      o.norm = norm;
      o.dtype = dt;
      o.dropout = 0.2;
      o.act_clip = 10.0;
      models::MLP mlp({12, 16, 8, 3}, o, gen);
      warm_up(mlp, {32, 12}, dt, gen);
      check_fused(mlp, {1, 12}, dt, norm == models::Norm::Batch ? 2 : 0, gen);
    }
  }
}

TEST_CASE("fuse_batch_norm matches every CNN of models/", "[fuse]") {
  for (Dtype dt : {Dtype::Float32, Dtype::Float64}) {
    for (models::ConvNorm norm : {models::ConvNorm::None, models::ConvNorm::Batch, models::ConvNorm::Group,
                                  models::ConvNorm::Instance, models::ConvNorm::Layer}) {
      INFO(dtype_name(dt) << " norm=" << models::conv_norm_name(norm));
      Generator gen(11);
      models::CNNOptions o;
      o.height = o.width = 12;
      o.channels = {8, 16};
      o.hidden = 16;
      o.groups = 4;
      o.norm = norm;
      o.dtype = dt;
      models::CNN cnn(o, gen);
      warm_up(cnn, {8, 1, 12, 12}, dt, gen);
      check_fused(cnn, {1, 1, 12, 12}, dt, norm == models::ConvNorm::Batch ? 3 : 0, gen);
    }
  }
}

TEST_CASE("fuse_batch_norm matches the default CNN (the issue's reference net)", "[fuse]") {
  Generator gen(3);
  models::CNN cnn({}, gen);
  warm_up(cnn, {4, 1, 28, 28}, Dtype::Float32, gen);
  check_fused(cnn, {1, 1, 28, 28}, Dtype::Float32, 3, gen);
}

TEST_CASE("fuse_batch_norm folds a bias-free strided, dilated, grouped Conv2d in a nested Sequential", "[fuse]") {
  Generator gen(5);
  auto inner = std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{
      std::make_shared<layers::Conv2d>(4, 6, layers::Size2(3, 2), 2, 1, 2, 2, false, Dtype::Float64, gen),
      std::make_shared<layers::BatchNorm2d>(6, layers::BatchNormOptions{.affine = false, .dtype = Dtype::Float64})});
  layers::Sequential net{inner};
  warm_up(net, {6, 4, 9, 9}, Dtype::Float64, gen);
  check_fused(net, {1, 4, 9, 9}, Dtype::Float64, 1, gen);
}

TEST_CASE("fuse_batch_norm refuses train mode and BatchNorm without running statistics", "[fuse][errors]") {
  Generator gen(1);
  models::MLP mlp({4, 6, 2}, {.norm = models::Norm::Batch}, gen);
  REQUIRE_THROWS_WITH(layers::fuse_batch_norm(mlp), Catch::Contains("the model (MLP) is in train mode; call eval() first"));
  mlp.eval();
  (*mlp[1]).train();
  REQUIRE_THROWS_WITH(layers::fuse_batch_norm(mlp), Catch::Contains("module '1' (BatchNorm1d) is in train mode"));

  layers::Sequential untracked{std::make_shared<layers::Linear>(4, 6, true, Dtype::Float32, gen),
                               std::make_shared<layers::BatchNorm1d>(6, layers::BatchNormOptions{.track_running_stats = false})};
  untracked.eval();
  REQUIRE_THROWS_WITH(layers::fuse_batch_norm(untracked),
                      Catch::Contains("module '1' (BatchNorm1d) has no running statistics (track_running_stats=false)"));

  layers::Sequential mismatch{std::make_shared<layers::Linear>(4, 6, true, Dtype::Float32, gen),
                              std::make_shared<layers::BatchNorm1d>(5)};
  mismatch.eval();
  REQUIRE_THROWS_WITH(layers::fuse_batch_norm(mismatch),
                      Catch::Contains("module '0' (Linear) has 6 outputs but the following module '1' (BatchNorm1d) normalises 5"));
}

TEST_CASE("clone_module copies values, modes and requires_grad, and leaves the original alone", "[fuse]") {
  Generator gen(2);
  models::MLP mlp({3, 4, 2}, {.norm = models::Norm::Layer}, gen);
  mlp.eval();
  mlp[0]->parameters()[0].requires_grad_(false);
  auto copy = layers::clone_module(mlp);
  REQUIRE(copy->type_name() == "Sequential");
  REQUIRE_FALSE(copy->is_training());
  const auto a = mlp.state_dict(), b = copy->state_dict();
  REQUIRE(a.size() == b.size());
  for (const auto& [k, v] : a) {
    REQUIRE(b.find(k) != nullptr);
    REQUIRE(b.find(k)->to_vector() == v.to_vector());
    REQUIRE_FALSE(b.find(k)->shares_storage_with(v));
  }
  REQUIRE_FALSE(copy->parameters()[0].requires_grad());
  REQUIRE(copy->parameters()[1].requires_grad());
}
