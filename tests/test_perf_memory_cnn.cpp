// Memory behaviour of a long CNN training loop, with either Conv2d backend: the im2col
// buffers, oneDNN's reorder buffers (its primitives are cached), pooling indices and BatchNorm2d statistics all come from the block
// cache, so nothing grows.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/storage.h"
#include "layers/functional/conv.h"
#include "layers/loss.h"
#include "models/cnn.h"
#include "optim/sgd.h"

using namespace tapegrad;

TEST_CASE("1,000 training steps (300 on 2 threads) of a Conv-BN2d-ReLU-MaxPool CNN neither grow memory nor the tape", "[perf][cnn]") {
  namespace F = layers::functional;
  const F::ConvBackend saved = F::conv_backend();
  struct Pass {
    int threads;
    F::ConvBackend backend;
  };
  std::vector<Pass> passes{{1, F::ConvBackend::Im2col}, {2, F::ConvBackend::Im2col}};
  if (F::conv_onednn_available()) passes.push_back({1, F::ConvBackend::OneDNN});
  for (const Pass& pass : passes) {
    const int threads = pass.threads;
    const int prev = get_num_threads();
    set_num_threads(threads);
    F::set_conv_backend(pass.backend);
    INFO((pass.backend == F::ConvBackend::OneDNN ? "oneDNN" : "im2col") << " convolutions");
    Generator gen(9);
    models::CNNOptions o;
    o.height = o.width = 12;
    o.channels = {4, 8};
    o.hidden = 16;
    o.norm = models::ConvNorm::Batch;
    models::CNN net(o, gen);
    net.train();
    optim::SGD sgd(net.parameters(), {.lr = 0.01, .momentum = 0.9});
    const Tensor x = randn({16, 1, 12, 12}, Dtype::Float32, gen);
    std::vector<std::int64_t> labels(16);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    const Tensor y = Tensor::from_int64(labels, {16});
    auto step = [&] {
      Tensor loss = layers::cross_entropy(net(x), y);
      sgd.zero_grad();
      loss.backward();
      sgd.step();
      return loss.item();
    };
    for (int i = 0; i < 20; ++i) step();  // warm the block cache
    const AllocatorStats warm = allocator_stats();
    double last = 0;
    const int steps = threads == 1 ? 1000 : 300;
    INFO(threads << " thread(s)");
    for (int i = 0; i < steps; ++i) {
      last = step();
      if (i % 100 == 0) {
        REQUIRE(autograd::tape_size() == 0);
        REQUIRE(allocator_stats().bytes_in_use == warm.bytes_in_use);
      }
    }
    const AllocatorStats end = allocator_stats();
    CHECK(std::isfinite(last));
    CHECK(autograd::tape_size() == 0);
    CHECK(end.bytes_in_use == warm.bytes_in_use);
#if !defined(__SANITIZE_ADDRESS__)
    // Every block came from the cache. With 2 threads, the two threads' im2col buffers may
    // overlap in time differently from the warm-up steps, so the cache may add a block or two
    // once (a bounded peak, not growth).
    if (threads == 1) CHECK(end.system_allocations == warm.system_allocations);
    else CHECK(end.system_allocations <= warm.system_allocations + 2);
#endif
    if (threads == 1) CHECK(end.bytes_cached == warm.bytes_cached);
    set_num_threads(prev);
  }
  F::set_conv_backend(saved);
}
