// Memory behaviour of long training loops and the exactness of the blocked, multi-threaded
// batch-norm statistics that the performance work introduced.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/random.h>
#include <tapegrad/core/storage.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/sgd.h>
#include "perf_memory_support.h"

using namespace tapegrad;

using test::kBlockCacheOn;
using test::ThreadsGuard;

TEST_CASE("10,000 training steps of the chapter's BN net neither grow memory nor the tape", "[perf]") {
  Generator gen(7);
  models::MLPOptions mo;
  mo.norm = models::Norm::Batch;
  models::MLP net({50, 128, 64, 32, 1}, mo, gen);
  net.train();
  optim::SGD sgd(net.parameters(), {.lr = 0.01});
  const Tensor x = randn({32, 50}, Dtype::Float32, gen), y = randn({32, 1}, Dtype::Float32, gen);
  test::require_flat_memory(
      [&] { return test::training_step(sgd, [&] { return layers::mse_loss(net(x), y); }); },
      {.steps = 10000, .check_every = 1000});
}

TEST_CASE("the block cache reuses freed blocks of the same size class", "[perf]") {
  const AllocatorStats before = allocator_stats();
  { Tensor a = Tensor::empty({1000, 37}); }  // 148,000 bytes -> the 147,456..163,840 class
  const AllocatorStats mid = allocator_stats();
  CHECK(mid.bytes_in_use == before.bytes_in_use);
  { Tensor b = Tensor::empty({1001, 37}); }  // same class: no new system allocation
  if (kBlockCacheOn) CHECK(allocator_stats().system_allocations == mid.system_allocations);
  { Tensor c = Tensor::empty({7}); }  // small blocks are recycled too
  const auto small = allocator_stats().system_allocations;
  { Tensor d = Tensor::empty({9}); }
  if (kBlockCacheOn) CHECK(allocator_stats().system_allocations == small);
}

TEST_CASE("blocked batch-norm statistics match a plain two-pass reference", "[perf]") {
  ThreadsGuard tg;
  // 5000 rows: many blocks per thread; channel 1 is constant (its variance must be exactly 0).
  const std::int64_t N = 5000, C = 3;
  Generator gen(3);
  Tensor x = randn({N, C}, Dtype::Float64, gen);
  double* p = x.data<double>();
  for (std::int64_t n = 0; n < N; ++n) {
    p[n * C + 0] = 1000.0 + 1e-3 * p[n * C + 0];  // large offset, small spread
    p[n * C + 1] = 0.1;
  }
  std::vector<double> ref_mean(C, 0.0), ref_var(C, 0.0);
  for (std::int64_t c = 0; c < C; ++c) {
    for (std::int64_t n = 0; n < N; ++n) ref_mean[c] += p[n * C + c];
    ref_mean[c] /= N;
    for (std::int64_t n = 0; n < N; ++n) ref_var[c] += (p[n * C + c] - ref_mean[c]) * (p[n * C + c] - ref_mean[c]);
    ref_var[c] /= N;
  }
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor m, v;
    layers::functional::batch_moments(x, m, v);
    for (std::int64_t c : {0, 2}) {
      CHECK(m.at(c) == Approx(ref_mean[c]).epsilon(1e-14));
      CHECK(v.at(c) == Approx(ref_var[c]).epsilon(1e-9).margin(0));
    }
    // the constant channel is exact (the plain reference itself rounds: 5000 additions of 0.1)
    CHECK(v.at(1) == 0.0);
    CHECK(m.at(1) == 0.1);
  }
  // float32: the constant channel stays exact across blocks; the others agree with float64
  Tensor xf = x.to(Dtype::Float32);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor m, v;
    layers::functional::batch_moments(xf, m, v);
    CHECK(v.at(1) == 0.0);
    CHECK(m.at(1) == static_cast<double>(0.1f));
    CHECK(v.at(2) == Approx(ref_var[2]).epsilon(1e-5));
    CHECK(m.at(0) == Approx(ref_mean[0]).epsilon(1e-7));
  }
}

TEST_CASE("large batch-norm forward/backward agree between one and two threads", "[perf]") {
  ThreadsGuard tg;
  // (40000, 4) float64 crosses the parallel threshold, so two threads split the rows.
  Generator gen(11);
  Tensor x = randn({40000, 4}, Dtype::Float64, gen);
  Tensor g = randn({40000, 4}, Dtype::Float64, gen);
  Tensor w = Tensor::from_vector({1.5, -0.5, 2.0, 1.0}, {4}, Dtype::Float64);
  w.requires_grad_();
  std::vector<std::vector<double>> out, gx, gw;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor xi = x.clone();
    xi.requires_grad_();
    w.zero_grad();
    Tensor y = layers::functional::batch_norm(xi, Tensor(), Tensor(), w, Tensor(), true);
    y.backward(g);
    out.push_back(y.to_vector());
    gx.push_back(xi.grad().to_vector());
    gw.push_back(w.grad().to_vector());
  }
  for (std::size_t i = 0; i < out[0].size(); i += 997) {
    CHECK(out[1][i] == Approx(out[0][i]).epsilon(1e-12).margin(1e-12));
    CHECK(gx[1][i] == Approx(gx[0][i]).epsilon(1e-10).margin(1e-12));
  }
  for (std::size_t c = 0; c < 4; ++c) CHECK(gw[1][c] == Approx(gw[0][c]).epsilon(1e-10));
  // the normalised output has mean 0 and biased variance 1 per channel (times γ)
  double s = 0, q = 0;
  for (std::int64_t n = 0; n < 40000; ++n) {
    const double v = out[0][n * 4 + 2] / 2.0;
    s += v;
    q += v * v;
  }
  CHECK(s / 40000 == Approx(0.0).margin(1e-12));
  CHECK(q / 40000 == Approx(1.0).epsilon(1e-4));  // eps = 1e-5 in the denominator
}
