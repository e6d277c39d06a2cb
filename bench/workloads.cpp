#include "workloads.h"

#include <cmath>
#include <fstream>
#include <stdexcept>

#include "kit/data.h"
#include "kit/run.h"
#include <tapegrad/core/ops.h>
#include <tapegrad/core/ops/gemm_backends.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>

namespace tgbench {
namespace tg = tapegrad;

std::shared_ptr<tg::layers::Sequential> make_net(const std::vector<std::int64_t>& sizes, bool batchnorm,
                                                 double bn_momentum, std::optional<double> act_clip,
                                                 tg::Generator& gen) {
  tg::models::MLPOptions mo;
  mo.norm = batchnorm ? tg::models::Norm::Batch : tg::models::Norm::None;
  mo.bn_momentum = bn_momentum;
  mo.act_clip = act_clip;
  auto net = std::make_shared<tg::models::MLP>(sizes, mo, gen);
  tg::layers::fuse_modules(*net);  // as the chapter's runs (kit::train_run)
  return net;
}

TrainStep::TrainStep(const std::vector<std::int64_t>& sizes, bool batchnorm, std::int64_t batch, double lr,
                     std::uint64_t seed) {
  tg::Generator gen(seed);
  net = make_net(sizes, batchnorm, 0.1, std::nullopt, gen);
  net->train();
  tg::optim::SGDOptions so;
  so.lr = lr;
  sgd_ = std::make_unique<tg::optim::SGD>(net->parameters(), so);
  x_ = tg::randn({batch, sizes.front()}, tg::Dtype::Float32, gen);
  y_ = tg::randn({batch, sizes.back()}, tg::Dtype::Float32, gen);
}

double TrainStep::step() {
  Tensor loss = tg::layers::mse_loss((*net)(x_), y_);
  sgd_->zero_grad();
  loss.backward();
  sgd_->step();
  return loss.item();
}

std::int64_t run_chapter(const ChapterOptions& o) {
  studies::kit::Dataset d;
  tg::Generator gen(o.seed);
  studies::kit::fill_chapter_rows(gen, 200, 50, 0.1, d.x_train, d.y_train);
  studies::kit::fill_chapter_rows(gen, 100, 50, 0.1, d.x_test, d.y_test);
  std::vector<studies::kit::RunConfig> configs;
  auto add = [&](std::vector<std::int64_t> sizes, bool bn, double lr, bool grad_clip) {
    studies::kit::RunConfig c;
    c.sizes = std::move(sizes);
    c.norm = bn ? tg::models::Norm::Batch : tg::models::Norm::None;
    c.lr = lr;
    c.epochs = o.epochs;
    c.batch = o.batch;
    c.bn_momentum = 0.01;
    if (grad_clip) c.grad_clip = 5.0;
    c.act_clip = 10.0;
    c.policies = {studies::kit::EvalPolicy::Train};  // the chapter evaluates in train mode
    c.seed = o.seed;
    configs.push_back(std::move(c));
  };
  const std::vector<std::int64_t> base{50, 128, 64, 32, 1};
  for (bool bn : {true, false}) add(base, bn, 0.01, true);  // Experiment 1
  for (double lr : {0.001, 0.01, 0.05})                      // Experiment 2
    for (bool bn : {true, false}) add(base, bn, lr, true);
  std::vector<std::int64_t> d15{50};
  for (int i = 0; i < 14; ++i) d15.push_back(64);
  d15.push_back(1);
  for (const auto& s : {std::vector<std::int64_t>{50, 128, 64, 32, 16, 1},  // Experiment 3
                        std::vector<std::int64_t>{50, 128, 128, 64, 64, 32, 32, 16, 16, 8, 1}, d15})
    for (bool bn : {true, false}) add(s, bn, 0.01, bn);  // no clipping for plain depth nets
  std::int64_t steps = 0;
  for (const auto& c : configs) steps += studies::kit::train_run(c, d).steps;
  return steps;
}

void triad(float* a, const float* b, const float* c, float s, std::int64_t n) {
  tg::parallel_for(n, tg::kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
  });
}

std::string machine_line() {
  std::string cpu = "unknown", family, model;
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    const std::string value = line.find(':') == std::string::npos ? "" : line.substr(line.find(':') + 2);
    if (line.rfind("model name", 0) == 0) {
      cpu = value;
      break;  // after family and model in /proc/cpuinfo
    }
    if (line.rfind("cpu family", 0) == 0) family = value;
    if (line.rfind("model\t", 0) == 0) model = value;
  }
  if (!family.empty()) cpu += " (family " + family + " model " + model + ")";
#if defined(__AVX512F__)
  const char* isa = "AVX-512";
#elif defined(__AVX2__) && defined(__FMA__)
  const char* isa = "AVX2+FMA";
#elif defined(__AVX__)
  const char* isa = "AVX";
#else
  const char* isa = "SSE2";
#endif
  return "CPU " + cpu + " | build ISA " + isa + " | libxsmm " + tapegrad::detail::xsmm_target() +
         " | OpenBLAS " + tapegrad::detail::blas_core_name() +
         (tapegrad::detail::blas_is_fallback() ? " (a fallback for this CPU: large products in Eigen)" : "");
}

}  // namespace tgbench
