// The norm kernels dispatched per ISA level (core/isa.h, layers/functional/kernels/
// dispatch.cpp) against float64 references computed here: BatchNorm1d over (N, C) (the
// bn_rows kernels) and LayerNorm rows (ln_rows), in float32 and float64, at sizes that take
// whole vectors and a tail on every level. The ctest entries isa_forced_<level> run these
// (tag [isa]) with TAPEGRAD_ISA set, so each variant the machine runs is checked.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/isa.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/layer_norm.h>
#include "isa_variants_support.h"

using namespace tapegrad;

namespace {
template <class T>
void check_norms(std::int64_t N, std::int64_t C) {
  std::vector<double> xs(static_cast<std::size_t>(N * C));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37 * double(i)) * 3.0 + 0.01 * double(i % 7) + 5.0;
  const Dtype dt = sizeof(T) == 4 ? Dtype::Float32 : Dtype::Float64;
  const Tensor x = Tensor::from_vector(xs, {N, C}, dt);
  const T* xp = x.data<T>();
  const Tensor y = layers::functional::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  const Tensor yl = layers::functional::layer_norm(x, {C}, Tensor(), Tensor(), 1e-5);
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
  INFO("kernels at " << isa_name(isa()) << ", N " << N << ", C " << C << ", " << dtype_name(dt));
  for (std::int64_t c = 0; c < C; ++c) {
    const auto [m, v] = test::mean_var(xp + c, N, C);
    for (std::int64_t n = 0; n < N; ++n)
      CHECK(double(y.data<T>()[n * C + c]) == Approx((double(xp[n * C + c]) - m) / std::sqrt(v + 1e-5)).margin(tol));
  }
  for (std::int64_t n = 0; n < N; ++n) {
    const auto [m, v] = test::mean_var(xp + n * C, C, 1);
    for (std::int64_t c = 0; c < C; ++c)
      CHECK(double(yl.data<T>()[n * C + c]) == Approx((double(xp[n * C + c]) - m) / std::sqrt(v + 1e-5)).margin(tol));
  }
}
}  // namespace

TEST_CASE("isa: the dispatched norm kernels agree with float64 under the chosen level", "[isa]") {
  for (std::int64_t C : {7, 16, 24, 64, 67}) {
    check_norms<float>(37, C);
    check_norms<double>(37, C);
  }
}
