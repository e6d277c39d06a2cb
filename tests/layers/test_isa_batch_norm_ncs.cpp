// BatchNorm's (N, C, S) kernels compiled per ISA level (layers/functional/kernels/
// batch_norm_ncs.h): every registered table this build carries and the CPU runs, called directly,
// against float64 references computed here: the statistics (one block of rows and several:
// thresholds::bn_spatial_block_rows), the backward sums, and the element-wise passes with
// and without streaming stores (rows shorter and longer than the stream buffer); then the
// dispatched batch_norm forward and backward on both sides of the 24 MiB streaming threshold.
#include "isa_variants_support.h"
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/isa.h>
#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/kernels/batch_norm_ncs.h>

using namespace tapegrad;
namespace fk = tapegrad::layers::functional::kernels;

namespace {

template <class T>
using NcsLevel = tapegrad::detail::KernelLevel<fk::BnNcsKernels<T>>;

// The registered table of each level this build carries (TAPEGRAD_KERNEL_LEVELS) that the CPU runs.
template <class T>
std::vector<NcsLevel<T>> runnable_variants() {
  return tapegrad::test::runnable_on_this_cpu(TAPEGRAD_KERNEL_LEVELS(fk, bn_ncs, T));
}

template <class T>
void check_level(const NcsLevel<T>& lv, std::int64_t N, std::int64_t C, std::int64_t S) {
  const fk::BnNcsKernels<T>& k = *lv.table;
  INFO(isa_name(lv.level) << ", " << (sizeof(T) == 4 ? "float32" : "float64") << ", N " << N << ", C " << C << ", S "
                         << S);
  const std::size_t M = static_cast<std::size_t>(N * C * S);
  std::vector<T> x(M), g(M);
  for (std::size_t i = 0; i < M; ++i) {
    x[i] = static_cast<T>(std::sin(0.37 * double(i)) * 3.0 + 0.01 * double(i % 7) + 5.0);
    g[i] = static_cast<T>(std::cos(0.19 * double(i)) - 0.2);
  }
  auto at = [&](const std::vector<T>& v, std::int64_t n, std::int64_t c, std::int64_t s) {
    return double(v[static_cast<std::size_t>((n * C + c) * S + s)]);
  };
  // float64 references per channel
  std::vector<double> mean(static_cast<std::size_t>(C)), m2(static_cast<std::size_t>(C)), s1(mean), s2(mean);
  for (std::int64_t c = 0; c < C; ++c) {
    double m = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) m += at(x, n, c, s);
    m /= double(N * S);
    double q = 0, a = 0, b = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) {
        q += (at(x, n, c, s) - m) * (at(x, n, c, s) - m);
        a += at(g, n, c, s);
        b += at(g, n, c, s) * (at(x, n, c, s) - m);
      }
    mean[static_cast<std::size_t>(c)] = m, m2[static_cast<std::size_t>(c)] = q;
    s1[static_cast<std::size_t>(c)] = a, s2[static_cast<std::size_t>(c)] = b;
  }
  // statistics of channels [1, C) only: channel 0 stays as it was
  std::vector<double> km(static_cast<std::size_t>(C), -1.0), kq(static_cast<std::size_t>(C), -1.0);
  k.moments(x.data(), N, C, S, 1, C, km.data(), kq.data());
  CHECK(km[0] == -1.0);
  CHECK(kq[0] == -1.0);
  for (std::int64_t c = 1; c < C; ++c) {
    const std::size_t u = static_cast<std::size_t>(c);
    REQUIRE(km[u] == Approx(mean[u]).epsilon(1e-13));
    REQUIRE(kq[u] == Approx(m2[u]).epsilon(1e-11));
  }
  std::vector<double> k1(static_cast<std::size_t>(C), -1.0), k2(k1);
  k.sums(x.data(), g.data(), N, C, S, mean.data(), 0, C, k1.data(), k2.data());
  for (std::int64_t c = 0; c < C; ++c) {
    const std::size_t u = static_cast<std::size_t>(c);
    REQUIRE(k1[u] == Approx(s1[u]).margin(1e-9 * double(N * S)));
    REQUIRE(k2[u] == Approx(s2[u]).margin(1e-9 * double(N * S)));
  }
  // element-wise passes over rows [1, N·C - 1), plain and streamed: the same bits
  std::vector<T> mu(static_cast<std::size_t>(C)), a(mu), b(mu), kk(mu);
  for (std::int64_t c = 0; c < C; ++c) {
    const std::size_t u = static_cast<std::size_t>(c);
    mu[u] = static_cast<T>(mean[u]), a[u] = static_cast<T>(0.5 + 0.25 * double(c)), b[u] = static_cast<T>(0.1 * double(c) - 0.3);
    kk[u] = static_cast<T>(0.01 * double(c + 1));
  }
  const std::int64_t rows = N * C, r0 = 1, r1 = rows - 1;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (bool stream : {false, true}) {
    INFO("stream " << stream);
    std::vector<T> y(M, T(7)), d(M, T(7));
    k.affine(x.data(), y.data(), C, S, r0, r1, mu.data(), a.data(), b.data(), stream);
    k.dx(x.data(), g.data(), d.data(), C, S, r0, r1, mu.data(), a.data(), b.data(), kk.data(), stream);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::size_t c = static_cast<std::size_t>(r % C);
      for (std::int64_t s = 0; s < S; ++s) {
        const std::size_t i = static_cast<std::size_t>(r * S + s);
        if (r < r0 || r >= r1) {
          REQUIRE(y[i] == T(7));
          REQUIRE(d[i] == T(7));
          continue;
        }
        const double xc = double(x[i]) - double(mu[c]);
        REQUIRE(double(y[i]) == Approx(xc * double(a[c]) + double(b[c])).margin(tol * 8));
        REQUIRE(double(d[i]) == Approx(double(a[c]) * (double(g[i]) - double(b[c]) - xc * double(kk[c]))).margin(tol * 8));
      }
    }
    static std::vector<T> y_plain, d_plain;
    if (!stream) {
      y_plain = y, d_plain = d;
    } else {
      CHECK(std::memcmp(y.data(), y_plain.data(), M * sizeof(T)) == 0);
      CHECK(std::memcmp(d.data(), d_plain.data(), M * sizeof(T)) == 0);
    }
  }
}

// batch_norm forward and backward (training) on x (N, C, S) through the dispatched kernels,
// against float64.
void check_dispatched(std::int64_t N, std::int64_t C, std::int64_t S, Dtype dt) {
  INFO("kernels at " << isa_name(isa()) << ", N " << N << ", C " << C << ", S " << S << ", " << dtype_name(dt));
  const std::size_t M = static_cast<std::size_t>(N * C * S);
  std::vector<double> xs(M), gs(M);
  for (std::size_t i = 0; i < M; ++i) {
    xs[i] = std::sin(0.37 * double(i)) * 3.0 + 0.01 * double(i % 7) + 5.0;
    gs[i] = std::cos(0.19 * double(i)) - 0.2;
  }
  Tensor x = Tensor::from_vector(xs, {N, C, S}, dt).requires_grad_();
  const Tensor g = Tensor::from_vector(gs, {N, C, S}, dt);
  const Tensor y = layers::functional::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  y.backward(g);
  const Tensor xd = x.to(Dtype::Float64), yd = y.to(Dtype::Float64), gd = x.grad().to(Dtype::Float64);
  const Tensor gg = g.to(Dtype::Float64);
  const double* xp = xd.data<double>();
  const double* gp = gg.data<double>();
  const double tol = dt == Dtype::Float32 ? 3e-5 : 1e-10;
  const double m = double(N * S);
  for (std::int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0, sg = 0, sgx = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) mean += xp[(n * C + c) * S + s];
    mean /= m;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) {
        const double u = xp[(n * C + c) * S + s] - mean;
        var += u * u;
        sg += gp[(n * C + c) * S + s];
        sgx += gp[(n * C + c) * S + s] * u;
      }
    var /= m;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < S; ++s) {
        const std::int64_t i = (n * C + c) * S + s;
        const double u = xp[i] - mean;
        REQUIRE(yd.data<double>()[i] == Approx(u * rstd).margin(tol));
        REQUIRE(gd.data<double>()[i] == Approx(rstd * (gp[i] - sg / m - u * rstd * rstd * sgx / m)).margin(tol));
      }
  }
}

}  // namespace

TEST_CASE("isa: the (N, C, S) batch-norm kernels of every runnable level agree with float64", "[isa]") {
  // S = 100: 163 rows a statistics block (one block at N = 5, two at N = 200); S = 20000:
  // one row a block, and rows longer than the 1024-value stream buffer; S = 9, 17: tails.
  for (auto [N, C, S] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{5, 3, 100}, {200, 3, 100}, {3, 2, 20000},
                         {4, 5, 9}, {7, 3, 17}, {2, 2, 1500}}) {
    for (const auto& k : runnable_variants<float>()) check_level(k, N, C, S);
    for (const auto& k : runnable_variants<double>()) check_level(k, N, C, S);
  }
}

TEST_CASE("isa: batch_norm over (N, C, S) through the dispatched kernels, both sides of the streaming threshold",
          "[isa]") {
  check_dispatched(8, 3, 49, Dtype::Float32);
  check_dispatched(8, 3, 49, Dtype::Float64);
  check_dispatched(40, 4, 196, Dtype::Float32);
  // 2·3·1,048,576 float32 = 24 MiB: the output is written with streaming stores
  check_dispatched(2, 3, 1 << 20, Dtype::Float32);
}
