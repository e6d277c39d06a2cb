// Core element-wise ops and sums on both sides of their size thresholds: kParallelGrain
// (core/parallel.h), where the element loops of core/ops/kernels.h (map_unary,
// map_binary_same) split over the threads, and detail::kSumColumnBlockBytes
// (core/ops/reduce.h), the block of columns a sum over a middle axis keeps in registers.
// Forward and backward, float32 and float64, on 1 and 2 threads, against loops in double
// written here. These ops have no train/eval mode.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/ops/reduce.h>

#include "thresholds_support.h"

using namespace tapegrad;
using namespace tapegrad::test::thresholds;

namespace {

// y = sigmoid(a)·b + a (a unary and two binary element loops) and its gradients
// da = dy·(sigmoid'(a)·b + 1), db = dy·sigmoid(a), over n elements.
template <class T>
void check_elementwise(std::int64_t n) {
  ThreadsGuard guard;
  const Tensor a = pattern<T>({n}, 81, 3.0), b = pattern<T>({n}, 82), g = pattern<T>({n}, 83);
  const T *ap = a.data<T>(), *bp = b.data<T>(), *gp = g.data<T>();
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  for (int nt : thread_counts()) {
    set_num_threads(nt);
    INFO(dtype_label<T>() << " " << n << " elements, " << nt << " thread(s)");
    Tensor al = a.detach().requires_grad_(), bl = b.detach().requires_grad_();
    Tensor y = add(mul(sigmoid(al), bl), al);
    y.backward(g);
    Mismatches my("y"), mda("da"), mdb("db");
    const T *yp = y.data<T>(), *dap = al.grad().data<T>(), *dbp = bl.grad().data<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(ap[i])));
      my.check_rel(i, yp[i], s * bp[i] + ap[i], tol);
      mda.check_rel(i, dap[i], gp[i] * (s * (1 - s) * bp[i] + 1), tol);
      mdb.check_rel(i, dbp[i], gp[i] * s, tol);
    }
    my.require();
    mda.require();
    mdb.require();
  }
}

// sum over axis 1 of (outer, R, inner) and its backward (dy broadcast back).
template <class T>
void check_middle_sum(std::int64_t outer, std::int64_t R, std::int64_t inner) {
  ThreadsGuard guard;
  const Tensor x = pattern<T>({outer, R, inner}, 91), g = pattern<T>({outer, inner}, 92);
  const T *xp = x.data<T>(), *gp = g.data<T>();
  std::vector<double> want(static_cast<std::size_t>(outer * inner)), mag(want.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t i = 0; i < inner; ++i) {
        want[o * inner + i] += xp[(o * R + r) * inner + i];
        mag[o * inner + i] += std::abs(static_cast<double>(xp[(o * R + r) * inner + i]));
      }
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  for (int nt : thread_counts()) {
    set_num_threads(nt);
    INFO(dtype_label<T>() << " sum over axis 1 of (" << outer << ", " << R << ", " << inner << "), " << nt << " thread(s)");
    Tensor xl = x.detach().requires_grad_();
    Tensor y = sum(xl, {1});
    y.backward(g);
    REQUIRE(y.numel() == outer * inner);
    Mismatches my("sum"), mdx("dx");
    const T *yp = y.data<T>(), *dxp = xl.grad().data<T>();
    for (std::size_t i = 0; i < want.size(); ++i) my.check(static_cast<std::int64_t>(i), yp[i], want[i], tol * mag[i] + 1e-300);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t i = 0; i < inner; ++i)
          mdx.check((o * R + r) * inner + i, dxp[(o * R + r) * inner + i], gp[o * inner + i], 0.0);
    my.require();
    mdx.require();
  }
}

}  // namespace

TEMPLATE_TEST_CASE("thresholds: element-wise loops just below and at kParallelGrain", "[thresholds][elementwise]",
                   float, double) {
  using T = TestType;
  check_elementwise<T>(kParallelGrain - 1);
  check_elementwise<T>(kParallelGrain);
  check_elementwise<T>(2 * kParallelGrain + 1);  // an odd split between two threads
}

TEMPLATE_TEST_CASE("thresholds: sum over a middle axis, one column block and one column more",
                   "[thresholds][reduce]", float, double) {
  using T = TestType;
  const std::int64_t W = detail::kSumColumnBlockBytes / static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t inner : {W - 1, W, W + 1, 2 * W + 1}) check_middle_sum<T>(3, 37, inner);
}
