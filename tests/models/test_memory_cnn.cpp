// Memory behaviour of a long CNN training loop, with either Conv2d backend: the im2col
// buffers, oneDNN's reorder buffers (its primitives are cached), pooling indices and
// BatchNorm2d statistics all come from the block cache, so nothing grows.
#include <catch2/catch.hpp>

#include <vector>

#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/optim/sgd.h>
#include "perf_memory_support.h"

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
    test::ThreadsGuard restore;
    set_num_threads(threads);
    F::set_conv_backend(pass.backend);
    INFO(threads << " thread(s), " << (pass.backend == F::ConvBackend::OneDNN ? "oneDNN" : "im2col") << " convolutions");
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
    // With 2 threads, the two threads' im2col buffers may overlap in time differently from
    // the warm-up steps, so the cache may add a block or two once (a bounded peak, not growth).
    test::require_flat_memory(
        [&] { return test::training_step(sgd, [&] { return layers::cross_entropy(net(x), y); }); },
        {.steps = threads == 1 ? 1000 : 300,
         .check_every = 100,
         .extra_system_allocations = threads == 1 ? 0 : 2,
         .same_cached_bytes = threads == 1});
  }
  F::set_conv_backend(saved);
}
