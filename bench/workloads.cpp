#include "workloads.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "chapter/data.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/gemm_backends.h"
#include "core/parallel.h"
#include "layers/loss.h"
#include "models/mlp.h"

namespace tgbench {
namespace tg = tapegrad;

std::shared_ptr<tg::layers::Sequential> make_net(const std::vector<std::int64_t>& sizes, bool batchnorm,
                                                 double bn_momentum, std::optional<double> act_clip,
                                                 tg::Generator& gen) {
  tg::models::MLPOptions mo;
  mo.norm = batchnorm ? tg::models::Norm::Batch : tg::models::Norm::None;
  mo.bn_momentum = bn_momentum;
  mo.act_clip = act_clip;
  return std::make_shared<tg::models::MLP>(sizes, mo, gen);
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

namespace {

struct Data {
  Tensor x_train, y_train, x_test, y_test;
};

bool crashed(double loss) { return !std::isfinite(loss) || loss > 1e10; }

struct Config {
  std::vector<std::int64_t> sizes;
  bool bn;
  double lr;
  bool grad_clip;
};

std::int64_t train_one(const Config& c, const Data& d, const ChapterOptions& o, std::uint64_t seed) {
  tg::Generator init(seed + 1), shuffle(seed + 2);
  auto net = make_net(c.sizes, c.bn, 0.01, 10.0, init);
  net->train();
  const auto params = net->parameters();
  tg::optim::SGDOptions so;
  so.lr = c.lr;
  tg::optim::SGD sgd(params, so);
  const std::int64_t n = d.x_train.size(0), f = d.x_train.size(1), steps = n / o.batch;
  Tensor xs = Tensor::empty({n, f}), ys = Tensor::empty({n, 1});
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::int64_t taken = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::iota(perm.begin(), perm.end(), std::int64_t{0});
    for (std::int64_t i = n - 1; i > 0; --i)
      std::swap(perm[i], perm[static_cast<std::size_t>(shuffle.uniform() * static_cast<double>(i + 1)) % (i + 1)]);
    for (std::int64_t i = 0; i < n; ++i) {
      std::memcpy(xs.data<float>() + i * f, d.x_train.data<float>() + perm[i] * f, sizeof(float) * f);
      ys.data<float>()[i] = d.y_train.data<float>()[perm[i]];
    }
    for (std::int64_t s = 0; s < steps; ++s) {
      Tensor xb = tg::alias_with_shape(xs, {o.batch, f}, sizeof(float) * s * o.batch * f);
      Tensor yb = tg::alias_with_shape(ys, {o.batch, 1}, sizeof(float) * s * o.batch);
      Tensor loss = tg::layers::mse_loss((*net)(xb), yb);
      if (crashed(loss.item())) return taken;
      sgd.zero_grad();
      loss.backward();
      if (c.grad_clip)
        for (const auto& p : params) {
          Tensor g = p.grad();
          if (!g.defined()) continue;
          float* q = g.data<float>();
          for (std::int64_t i = 0, m = g.numel(); i < m; ++i) q[i] = std::clamp(q[i], -5.0f, 5.0f);
        }
      sgd.step();
      ++taken;
    }
    // the chapter evaluates in train mode: BN uses (and tracks) the evaluated set's statistics
    tg::NoGradGuard ng;
    const double l1 = tg::layers::mse_loss((*net)(d.x_train), d.y_train).item();
    const double l2 = tg::layers::mse_loss((*net)(d.x_test), d.y_test).item();
    if (crashed(l1) || crashed(l2)) return taken;
  }
  return taken;
}

}  // namespace

std::int64_t run_chapter(const ChapterOptions& o) {
  tg::Generator gen(o.seed);
  Data d;
  chapter::fill_chapter_rows(gen, 200, 50, 0.1, d.x_train, d.y_train);
  chapter::fill_chapter_rows(gen, 100, 50, 0.1, d.x_test, d.y_test);
  std::vector<Config> configs;
  const std::vector<std::int64_t> base{50, 128, 64, 32, 1};
  for (bool bn : {true, false}) configs.push_back({base, bn, 0.01, true});  // Experiment 1
  for (double lr : {0.001, 0.01, 0.05})                                       // Experiment 2
    for (bool bn : {true, false}) configs.push_back({base, bn, lr, true});
  std::vector<std::int64_t> d15{50};
  for (int i = 0; i < 14; ++i) d15.push_back(64);
  d15.push_back(1);
  for (const auto& s : {std::vector<std::int64_t>{50, 128, 64, 32, 16, 1},  // Experiment 3
                        std::vector<std::int64_t>{50, 128, 128, 64, 64, 32, 32, 16, 16, 8, 1}, d15})
    for (bool bn : {true, false}) configs.push_back({s, bn, 0.01, bn});  // no clipping for plain depth nets
  std::int64_t steps = 0;
  for (const auto& c : configs) steps += train_one(c, d, o, o.seed);
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
