// SyncBatchNorm differentiated twice: on 2 ranks ("[np2]", run by ctest through
// `mpirun -np 2`) each rank's slice of the second derivative equals single-process
// BatchNorm's on the concatenated batch, and the weight's equals it summed over ranks; in a
// world of one ("[single]") gradgradcheck.
#include <catch2/catch.hpp>

#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/gradcheck.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include "test_support.h"

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {
autograd::GradOptions create_graph() {
  autograd::GradOptions o;
  o.create_graph = true;
  return o;
}
void set_values(Tensor& t, const Tensor& from) {
  const auto v = from.to_vector();
  std::copy(v.begin(), v.end(), t.data<double>());
}
}  // namespace

TEST_CASE("SyncBatchNorm's double backward on 2 ranks equals BatchNorm's on the concatenated batch",
          "[np2][syncbn][double_backward]") {
  tapegrad::ModeChecksPause pause;
  REQUIRE(dist::world_size() == 2);
  const std::int64_t r = dist::rank();
  for (const Shape& s : {Shape{8, 3}, Shape{4, 3, 2}, Shape{2, 3, 2, 2}}) {
    Generator g(31);  // the same values on both ranks
    const Tensor X = uniform(s, -2, 2, Dtype::Float64, g), U = uniform(s, -1, 1, Dtype::Float64, g),
                 V = uniform(s, -1, 1, Dtype::Float64, g);
    const Tensor w0 = uniform({3}, 0.5, 1.5, Dtype::Float64, g), b0 = uniform({3}, -1, 1, Dtype::Float64, g);
    const std::int64_t n = s[0] / 2;
    auto mine = [&](const Tensor& t) { return narrow(t, 0, r * n, n).clone(); };
    // one process, the whole batch: gx = d(Σ y·U)/dx with a graph, then d(Σ gx·V)/d(x, γ)
    Tensor x1 = X.clone().requires_grad_(), w1 = w0.clone().requires_grad_(), b1 = b0.clone().requires_grad_();
    Tensor y1 = layers::functional::batch_norm(x1, w1, b1, layers::functional::RunningStats{}, true, 1e-5);
    Tensor gx1 = autograd::grad({sum(mul(y1, U))}, {x1}, {}, create_graph())[0];
    const auto d1 = autograd::grad({sum(mul(gx1, V))}, {x1, w1});
    // two ranks, half the batch each
    layers::BatchNormOptions o;
    o.dtype = Dtype::Float64;
    dist::SyncBatchNorm sbn(3, o);
    set_values(sbn.weight, w0);
    set_values(sbn.bias, b0);
    Tensor x2 = mine(X).requires_grad_();
    Tensor y2 = sbn.forward(x2);
    Tensor gx2 = autograd::grad({sum(mul(y2, mine(U)))}, {x2}, {}, create_graph())[0];
    REQUIRE(gx2.requires_grad());
    const auto d2 = autograd::grad({sum(mul(gx2, mine(V)))}, {x2, sbn.weight});
    std::vector<double> dw = d2[1].to_vector();
    dist::allreduce_sum(dw.data(), static_cast<std::int64_t>(dw.size()));  // γ's gradient is each rank's part
    INFO("shape " << shape_str(s) << " rank " << r);
    test::require_close(gx2, mine(gx1.detach()), 1e-12);
    test::require_close(d2[0], mine(d1[0]), 1e-10);
    test::require_close(dw, d1[1].to_vector(), 1e-10);
    double largest = 0;
    for (double v : d1[0].to_vector()) largest = std::max(largest, std::abs(v));
    REQUIRE(largest > 1e-2);  // a second derivative that is really there
  }
}

TEST_CASE("SyncBatchNorm in a world of one: gradgradcheck, affine, (N, C) and (N, C, H, W)",
          "[single][syncbn][double_backward]") {
  tapegrad::ModeChecksPause pause;
  Generator g(32);
  for (const Shape& s : {Shape{5, 3}, Shape{2, 3, 2, 2}}) {
    layers::BatchNormOptions o;
    o.dtype = Dtype::Float64;
    dist::SyncBatchNorm sbn(3, o);
    set_values(sbn.weight, uniform({3}, 0.5, 1.5, Dtype::Float64, g));
    Tensor x = uniform(s, -2, 2, Dtype::Float64, g).requires_grad_();
    auto res = gradgradcheck([&](const std::vector<Tensor>& v) { return sbn.forward(v[0]); }, {x});
    INFO("shape " << shape_str(s) << ": " << res.message);
    REQUIRE(res.ok);
  }
}
