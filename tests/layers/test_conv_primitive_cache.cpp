// oneDNN's primitive cache for conv2d is bounded (least recently used evicted past the
// capacity). Before: batch sizes 1..400 through one Conv2d kept 4,800 primitives and grew
// the process from 12 to 111 MiB.
#include <catch2/catch.hpp>

#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/conv.h>
#include <tapegrad/layers/functional/kernels/conv_dnnl.h>

using namespace tapegrad;
using namespace tapegrad::layers::functional;

namespace {
struct Restore {
  ConvBackend backend = conv_backend();
  std::size_t capacity = conv_primitive_cache_capacity();
  ~Restore() {
    set_conv_backend(backend);
    set_conv_primitive_cache_capacity(capacity);
  }
};

std::vector<double> conv_at_batch(std::int64_t n, bool backward) {
  Generator gen(static_cast<std::uint64_t>(n));
  Tensor x = uniform({n, 16, 6, 6}, -1, 1, Dtype::Float32, gen).requires_grad_();
  Tensor w = uniform({8, 16, 3, 3}, -1, 1, Dtype::Float32, gen).requires_grad_();
  Tensor y = conv2d(x, w, Tensor(), 1, 1);
  if (backward) sum(y).backward();
  std::vector<double> out = y.to_vector();
  if (backward) {
    const std::vector<double> g = w.grad().to_vector();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}
}  // namespace

TEST_CASE("conv2d oneDNN primitive cache: bounded, least recently used evicted", "[conv][conv_cache]") {
  if (!conv_onednn_available()) {
    CHECK(conv_primitive_cache_capacity() == 0);
    CHECK(conv_primitive_cache_size() == 0);
    return;
  }
  Restore restore;
  CHECK(conv_primitive_cache_capacity() == kernels::kDnnlConvDefaultCacheCapacity);
  set_conv_backend(ConvBackend::OneDNN);
  set_conv_primitive_cache_capacity(0);
  CHECK(conv_primitive_cache_size() == 0);
  const std::vector<double> uncached = conv_at_batch(7, true);  // a capacity of 0 still computes
  CHECK(conv_primitive_cache_size() == 0);
  set_conv_primitive_cache_capacity(6);
  // 40 batch sizes through one convolution: the cache holds the last 6 configurations
  for (std::int64_t n = 1; n <= 40; ++n) {
    conv_at_batch(n, n % 3 == 0);
    CHECK(conv_primitive_cache_size() == static_cast<std::size_t>(std::min<std::int64_t>(n, 6)));
  }
  // the most recent ones create nothing; an evicted one is created again
  const std::int64_t before = kernels::dnnl_conv_primitives_created();
  for (std::int64_t n = 35; n <= 40; ++n) conv_at_batch(n, false);
  CHECK(kernels::dnnl_conv_primitives_created() == before);
  conv_at_batch(1, false);
  CHECK(kernels::dnnl_conv_primitives_created() > before);
  CHECK(conv_primitive_cache_size() == 6);
  // same values whether the primitives were cached or not
  CHECK(conv_at_batch(7, true) == uncached);
  // lowering the capacity evicts at once
  set_conv_primitive_cache_capacity(2);
  CHECK(conv_primitive_cache_size() == 2);
}
