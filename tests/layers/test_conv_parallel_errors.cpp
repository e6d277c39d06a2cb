// Conv2d under threads: an im2col buffer that cannot be allocated (the output could be) is a
// catchable std::bad_alloc on any thread count (before: 1 thread threw, 2 threads aborted
// the process, exit 134); a set_num_threads() from another thread during im2col backwards
// never mixes two thread counts in one call (before: 18 of 6,000 weight gradients wrong, up
// to 15x, when the partial-sum slots were sized by one reading and the region by another).
#include <catch2/catch.hpp>

#include <atomic>
#include <new>
#include <thread>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/functional/conv.h>

using namespace tapegrad;
using namespace tapegrad::layers::functional;

namespace {
struct Restore {
  ConvBackend backend = conv_backend();
  int threads = get_num_threads();
  ~Restore() {
    set_conv_backend(backend);
    set_num_threads(threads);
  }
};
}  // namespace

TEST_CASE("conv2d: an im2col buffer too large to allocate is std::bad_alloc on 1, 2 and 3 threads",
          "[conv][parallel_errors]") {
  Restore restore;
  set_conv_backend(ConvBackend::Im2col);
  // weight (1, 1, 2896, 2896): K = 8,386,816 rows of im2col; padding 2547 gives a 2200 x 2200
  // output, so one sample's im2col buffer is K x 4,840,000 float32 = 1.6e14 bytes (above the
  // 2^47 no machine maps), while the output (3 x 2200 x 2200 float32, 58 MB) fits.
  const Tensor x = Tensor::ones({3, 1, 1, 1}, Dtype::Float32);
  const Tensor w = Tensor::zeros({1, 1, 2896, 2896}, Dtype::Float32);
  for (int threads : {1, 2, 3}) {
    INFO("threads " << threads);
    set_num_threads(threads);
    CHECK_THROWS_AS(conv2d(x, w, Tensor(), 1, 2547), std::bad_alloc);
  }
  // the same conv on a small padding runs (the pool is intact after the failures)
  set_num_threads(2);
  const Tensor y = conv2d(Tensor::ones({3, 1, 4, 4}, Dtype::Float32), Tensor::ones({1, 1, 3, 3}, Dtype::Float32),
                          Tensor(), 1, 1);
  CHECK(y.to_vector()[5] == 9.0);  // an interior output: the 3x3 window of ones
}

TEST_CASE("conv2d: set_num_threads from another thread during im2col backwards gives a consistent gradient",
          "[conv][parallel_errors]") {
  Restore restore;
  set_conv_backend(ConvBackend::Im2col);
  Generator gen(3);
  const Tensor x = uniform({8, 3, 10, 10}, -1, 1, Dtype::Float32, gen);
  const Tensor w0 = uniform({6, 3, 3, 3}, -1, 1, Dtype::Float32, gen);
  const Tensor gy = uniform({8, 6, 10, 10}, -1, 1, Dtype::Float32, gen);
  auto dw_at = [&] {
    Tensor w = w0.clone().requires_grad_();
    conv2d(x, w, Tensor(), 1, 1).backward(gy);
    return w.grad().to_vector();
  };
  // the weight gradient on 1 and on 2 threads (their partial sums may round differently)
  set_num_threads(1);
  const std::vector<double> ref1 = dw_at();
  set_num_threads(2);
  const std::vector<double> ref2 = dw_at();
  std::atomic<bool> stop{false};
  std::thread toggler([&] {
    for (int i = 0; !stop.load(); ++i) set_num_threads(1 + (i & 1));
  });
  int wrong = 0;
  const int calls = 1500;
  for (int i = 0; i < calls; ++i) {
    const std::vector<double> dw = dw_at();
    if (dw != ref1 && dw != ref2) ++wrong;
  }
  stop = true;
  toggler.join();
  INFO(wrong << " of " << calls << " weight gradients match neither the 1- nor the 2-thread result");
  CHECK(wrong == 0);
}
