// Loading refuses state no module can hold: a negative running_var or
// num_batches_tracked, a non-finite running statistic or parameter. The message names the
// tensor, the bad value and its index; nothing is written; LoadOptions::check_values =
// false loads it anyway.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/optim/training_checkpoint.h>
#include "test_errors_support.h"
#include "temp_dir_support.h"

using namespace tapegrad;
using Catch::Matchers::Contains;
using tapegrad::test::thrown;
namespace fs = std::filesystem;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::shared_ptr<layers::Sequential> net() {
  Generator g(3);
  auto lin = std::make_shared<layers::Linear>(3, 4, true, Dtype::Float32, g);
  return std::make_shared<layers::Sequential>(
      std::initializer_list<layers::ModulePtr>{lin, std::make_shared<layers::BatchNorm1d>(4)});
}

// A copy of m's state with `key` replaced by `value`.
layers::StateDict with(const layers::Module& m, const std::string& key, const Tensor& value) {
  layers::StateDict d;
  for (const auto& [k, v] : m.state_dict()) d.insert(k, k == key ? value : v.clone());
  return d;
}

using tapegrad::test::TempDir;

}  // namespace

TEST_CASE("load_state_dict refuses impossible buffers and non-finite parameters, naming the tensor",
          "[errors][reliability][checkpoint]") {
  auto m = net();
  const auto before = m->state_dict().at("1.running_var").to_vector();
  const auto w_before = m->state_dict().at("0.weight").to_vector();

  CHECK_THAT(thrown<std::invalid_argument>(
                 [&] { m->load_state_dict(with(*m, "1.running_var", Tensor::from_vector({1, 2, -0.5, 1}, {4}, Dtype::Float32))); }),
             Contains("1.running_var") && Contains(">= 0") && Contains("-0.5") && Contains("index 2") &&
                 Contains("nothing was loaded"));
  CHECK_THAT(thrown<std::invalid_argument>(
                 [&] { m->load_state_dict(with(*m, "1.num_batches_tracked", Tensor::from_int64({-3}, {}))); }),
             Contains("1.num_batches_tracked") && Contains(">= 0") && Contains("-3"));
  CHECK_THAT(thrown<std::invalid_argument>(
                 [&] { m->load_state_dict(with(*m, "1.running_mean", Tensor::from_vector({0, kInf, 0, 0}, {4}, Dtype::Float32))); }),
             Contains("1.running_mean") && Contains("finite") && Contains("inf"));
  Tensor bad_w = m->state_dict().at("0.weight").clone();
  bad_w.data<float>()[5] = static_cast<float>(kNaN);
  CHECK_THAT(thrown<std::invalid_argument>([&] { m->load_state_dict(with(*m, "0.weight", bad_w)); }),
             Contains("0.weight") && Contains("finite") && Contains("nan") && Contains("index 5"));
  // non-strict loads are checked too
  CHECK_THAT(thrown<std::invalid_argument>([&] {
               m->load_state_dict(with(*m, "1.running_var", Tensor::from_vector({-1, 1, 1, 1}, {4}, Dtype::Float32)), false);
             }),
             Contains("1.running_var"));
  // every bad tensor is named at once
  {
    auto d = with(*m, "1.running_var", Tensor::from_vector({-1, 1, 1, 1}, {4}, Dtype::Float32));
    d.insert("0.weight", bad_w);
    const std::string msg = thrown<std::invalid_argument>([&] { m->load_state_dict(d); });
    CHECK_THAT(msg, Contains("1.running_var") && Contains("0.weight"));
  }
  // nothing changed
  CHECK(m->state_dict().at("1.running_var").to_vector() == before);
  CHECK(m->state_dict().at("0.weight").to_vector() == w_before);

  // the opt-out, for studying broken checkpoints
  m->load_state_dict(with(*m, "1.running_var", Tensor::from_vector({1, 2, -0.5, 1}, {4}, Dtype::Float32)),
                     layers::LoadOptions{.strict = true, .check_values = false});
  CHECK(m->state_dict().at("1.running_var").to_vector() == std::vector<double>{1, 2, -0.5, 1});
}

TEST_CASE("layers::load refuses a checkpoint with a negative running_var or a NaN weight, naming the file",
          "[errors][reliability][checkpoint]") {
  TempDir dir;
  auto src = net();
  src->state_dict().at("1.running_var").data<float>()[1] = -2.0f;
  const std::string path = dir.file("broken.safetensors");
  layers::save(*src, path);

  auto dst = net();
  const auto before = dst->state_dict().at("1.running_var").to_vector();
  CHECK_THAT(thrown<std::invalid_argument>([&] { layers::load(*dst, path); }),
             Contains("broken.safetensors") && Contains("1.running_var") && Contains("-2") && Contains(">= 0"));
  CHECK(dst->state_dict().at("1.running_var").to_vector() == before);
  layers::load(*dst, path, layers::LoadOptions{.strict = true, .check_values = false});
  CHECK(dst->state_dict().at("1.running_var").to_vector()[1] == -2.0);
}

TEST_CASE("a training checkpoint with an impossible buffer is refused and the model stays as it was",
          "[errors][reliability][checkpoint]") {
  TempDir dir;
  auto m = net();
  optim::SGD sgd(m->parameters(), {.lr = 0.1});
  m->state_dict().at("1.running_var").data<float>()[0] = std::nanf("");
  const std::string path = dir.file("train.safetensors");
  optim::save_training_checkpoint(path, *m, sgd, 1);

  auto fresh = net();
  optim::SGD sgd2(fresh->parameters(), {.lr = 0.1});
  const auto before = fresh->state_dict().at("1.running_var").to_vector();
  CHECK_THAT(thrown<std::invalid_argument>([&] { optim::load_training_checkpoint(path, *fresh, sgd2); }),
             Contains("1.running_var") && Contains("finite"));
  CHECK(fresh->state_dict().at("1.running_var").to_vector() == before);
}

TEST_CASE("num_batches_tracked loaded at INT64_MAX saturates in the train step, with and without momentum",
          "[errors][reliability][checkpoint]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (const bool cumulative : {false, true}) {
    INFO((cumulative ? "momentum = nullopt (cumulative average)" : "momentum 0.1"));
    layers::BatchNormOptions o{.dtype = Dtype::Float64};
    if (cumulative) o.momentum = std::nullopt;
    layers::BatchNorm1d bn(2, o);
    bn.load_state_dict(with(bn, "num_batches_tracked", Tensor::from_int64({kMax}, {})));
    bn.forward(Tensor::from_vector({1, 2, 3, 6}, {2, 2}, Dtype::Float64));
    CHECK(bn.batches_tracked() == kMax);
    // batch means (2, 4); cumulative: factor 1/(INT64_MAX + 1) ~ 1e-19 keeps the running mean at ~0
    const auto rm = bn.running_mean.to_vector();
    REQUIRE(rm.size() == 2);
    CHECK(rm[0] == (cumulative ? Approx(0.0).margin(1e-15) : Approx(0.2)));
    CHECK(rm[1] == (cumulative ? Approx(0.0).margin(1e-15) : Approx(0.4)));
    CHECK(rm[0] >= 0.0);
  }
}

TEST_CASE("a negative num_batches_tracked loaded without the value check is refused at the train step",
          "[errors][reliability][checkpoint]") {
  for (const bool cumulative : {false, true}) {
    INFO((cumulative ? "momentum = nullopt" : "momentum 0.1"));
    layers::BatchNormOptions o{.dtype = Dtype::Float64};
    if (cumulative) o.momentum = std::nullopt;
    layers::BatchNorm1d bn(2, o);
    bn.load_state_dict(with(bn, "num_batches_tracked", Tensor::from_int64({-1}, {})), layers::LoadOptions{true, false});
    const Tensor x = Tensor::from_vector({1, 2, 3, 6}, {2, 2}, Dtype::Float64);
    CHECK_THAT(thrown<std::invalid_argument>([&] { bn.forward(x); }),
               Contains("num_batches_tracked >= 0") && Contains("got -1"));
    CHECK(bn.batches_tracked() == -1);
    CHECK(bn.running_mean.to_vector() == std::vector<double>{0, 0});
  }
}
