// Single-sample inference latency of fuse_batch_norm's copy against the unfused model: the
// Fashion-MNIST MLP (784-256-128-10, BatchNorm1d) and the CNN (28x28, BatchNorm2d).
// A timing loop (no Google Benchmark needed): for each model, `repeats` rounds of `iters`
// eval forwards of one sample under NoGradGuard, alternating unfused and fused; prints the
// median and minimum time per forward. Run with OMP_NUM_THREADS=1 for a quiet measurement.
// Usage: fuse_batch_norm_latency [iters=2000] [repeats=7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/fuse_batch_norm.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/models/mlp.h>

using namespace tapegrad;

namespace {

double time_per_call_us(layers::Module& m, const Tensor& x, int iters) {
  NoGradGuard ng;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) m(x);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

void compare(const char* name, layers::Module& model, const Shape& warm_shape, const Shape& one, int iters, int repeats) {
  Generator gen(0);
  model.train();
  for (int i = 0; i < 3; ++i) model(randn(warm_shape, Dtype::Float32, gen));
  model.eval();
  layers::FuseReport r;
  auto fused = layers::fuse_batch_norm(model, &r);
  Tensor x = randn(one, Dtype::Float32, gen);
  time_per_call_us(model, x, iters / 10 + 1);  // warm-up
  time_per_call_us(*fused, x, iters / 10 + 1);
  std::vector<double> a, b;
  for (int k = 0; k < repeats; ++k) {
    a.push_back(time_per_call_us(model, x, iters));
    b.push_back(time_per_call_us(*fused, x, iters));
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double ma = a[a.size() / 2], mb = b[b.size() / 2];
  std::printf("%-28s fused %zu BN | unfused median %8.2f us (min %8.2f) | fused median %8.2f us (min %8.2f) | %.2fx\n",
              name, r.fused, ma, a.front(), mb, b.front(), ma / mb);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  if (iters < 1 || repeats < 1) {
    std::fprintf(stderr, "usage: fuse_batch_norm_latency [iters >= 1] [repeats >= 1]\n");
    return 2;
  }
  models::MLP mlp({784, 256, 128, 10}, {.norm = models::Norm::Batch, .dropout = 0.2});
  compare("MLP 784-256-128-10 (batch 1)", mlp, {64, 784}, {1, 784}, iters, repeats);
  models::CNN cnn;
  compare("CNN 28x28 32-64-128 (batch 1)", cnn, {16, 1, 28, 28}, {1, 1, 28, 28}, std::max(1, iters / 10), repeats);
  return 0;
}
