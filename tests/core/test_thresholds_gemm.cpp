// The GEMM backends on both sides of every crossover of chosen_gemm_backend()
// (core/ops/gemm_backends.h): the flop count that sends a product to OpenBLAS, libxsmm's
// minimum column count, its limit on K with B transposed, its column multiple (float32 in a
// build without AVX-512), and xsmm_gemm's dimension limit. Each size runs every transpose
// (NN, NT, TN, TT), overwriting and accumulating, float32 and float64, on 1 and 2 threads,
// against float64 loops written here; at the flop crossover matmul's backward (dA = dC·Bᵀ, an
// NT product, and dB = Aᵀ·dC, a TN product) is checked too. The test also asserts which
// backend each side takes, so a moved crossover is caught where it moved. Products have no
// train/eval mode.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/core/ops/gemm_backends.h>
#include <tapegrad/core/ops/matmul.h>

#include "thresholds_support.h"

using namespace tapegrad;
using namespace tapegrad::test::thresholds;
using tapegrad::detail::GemmBackend;

namespace {

struct ForceGuard {
  ~ForceGuard() { detail::force_gemm_backend(GemmBackend::Auto); }
};

template <class T>
constexpr double kTol = std::is_same_v<T, float> ? 1e-5 : 1e-13;  // of Σ|a·b| per element

// C (M, N) = op(A)·op(B) (+ C0 when accumulating), with the magnitude Σ|terms| per element.
template <class T>
void reference(bool ta, bool tb, const Tensor& a, const Tensor& b, const Tensor* c0, std::int64_t M, std::int64_t N,
               std::int64_t K, std::vector<double>& c, std::vector<double>& mag) {
  const T *A = a.data<T>(), *B = b.data<T>();
  c.assign(static_cast<std::size_t>(M * N), 0.0);
  mag.assign(c.size(), 0.0);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k) {
      const double av = ta ? A[k * M + i] : A[i * K + k];
      double* ci = c.data() + i * N;
      double* mi = mag.data() + i * N;
      for (std::int64_t j = 0; j < N; ++j) {
        const double p = av * (tb ? B[j * K + k] : B[k * N + j]);
        ci[j] += p;
        mi[j] += std::abs(p);
      }
    }
  if (c0)
    for (std::size_t i = 0; i < c.size(); ++i) {
      c[i] += c0->data<T>()[i];
      mag[i] += std::abs(static_cast<double>(c0->data<T>()[i]));
    }
}

template <class T>
void require_matches(const char* what, const Tensor& got, const std::vector<double>& want,
                     const std::vector<double>& mag) {
  REQUIRE(got.numel() == static_cast<std::int64_t>(want.size()));
  Mismatches mm(what);
  const T* g = got.data<T>();
  for (std::size_t i = 0; i < want.size(); ++i) mm.check(static_cast<std::int64_t>(i), g[i], want[i], kTol<T> * mag[i] + 1e-300);
  mm.require();
}

// detail::gemm for every transpose, overwriting and accumulating, on every thread count.
template <class T>
void check_gemm(std::int64_t M, std::int64_t N, std::int64_t K) {
  ThreadsGuard guard;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = pattern<T>(ta ? Shape{K, M} : Shape{M, K}, 51), b = pattern<T>(tb ? Shape{N, K} : Shape{K, N}, 52);
      const Tensor c0 = pattern<T>({M, N}, 53);
      std::vector<double> want, mag, want_acc, mag_acc;
      reference<T>(ta, tb, a, b, nullptr, M, N, K, want, mag);
      reference<T>(ta, tb, a, b, &c0, M, N, K, want_acc, mag_acc);
      for (int nt : thread_counts()) {
        set_num_threads(nt);
        INFO(dtype_label<T>() << " M=" << M << " N=" << N << " K=" << K << (ta ? " T" : " N") << (tb ? "T" : "N")
                              << ", backend " << detail::gemm_backend_name(detail::chosen_gemm_backend(dtype_for<T>(), M, N, K, ta, tb))
                              << ", " << nt << " thread(s)");
        Tensor c = Tensor::full({M, N}, std::nan(""), dtype_for<T>());  // every element must be written
        detail::gemm(ta, tb, a, b, c);
        require_matches<T>("C = op(A)·op(B)", c, want, mag);
        Tensor acc = c0.clone();
        detail::gemm(ta, tb, a, b, acc, true);
        require_matches<T>("C += op(A)·op(B)", acc, want_acc, mag_acc);
      }
    }
}

// matmul forward and backward: C = A·B, dA = dC·Bᵀ, dB = Aᵀ·dC.
template <class T>
void check_matmul_backward(std::int64_t M, std::int64_t N, std::int64_t K) {
  ThreadsGuard guard;
  const Tensor a = pattern<T>({M, K}, 61), b = pattern<T>({K, N}, 62), g = pattern<T>({M, N}, 63);
  std::vector<double> c, cm, da, dam, db, dbm;
  reference<T>(false, false, a, b, nullptr, M, N, K, c, cm);
  reference<T>(false, true, g, b, nullptr, M, K, N, da, dam);
  reference<T>(true, false, a, g, nullptr, K, N, M, db, dbm);
  for (int nt : thread_counts()) {
    set_num_threads(nt);
    INFO(dtype_label<T>() << " matmul (" << M << ", " << K << ") @ (" << K << ", " << N << "), " << nt << " thread(s)");
    Tensor al = a.detach().requires_grad_(), bl = b.detach().requires_grad_();
    Tensor out = matmul(al, bl);
    out.backward(g);
    require_matches<T>("matmul", out, c, cm);
    require_matches<T>("dA = dC·Bᵀ", al.grad(), da, dam);
    require_matches<T>("dB = Aᵀ·dC", bl.grad(), db, dbm);
  }
}

GemmBackend chosen(Dtype dt, std::int64_t M, std::int64_t N, std::int64_t K, bool ta = false, bool tb = false) {
  return detail::chosen_gemm_backend(dt, M, N, K, ta, tb);
}

}  // namespace

TEMPLATE_TEST_CASE("thresholds: GEMM, the flop count that sends a product to OpenBLAS", "[thresholds][gemm]", float,
                   double) {
  using T = TestType;
  const Dtype dt = dtype_for<T>();
  // M·256·256 multiply-adds: exactly kGemmSmallMaxFlops at M = kGemmSmallMaxFlops / 65536
  constexpr std::int64_t N = 256, K = 256;
  const std::int64_t M = detail::kGemmSmallMaxFlops / (N * K);
  REQUIRE(M * N * K == detail::kGemmSmallMaxFlops);
  const GemmBackend large = detail::blas_is_fallback() ? GemmBackend::Eigen : GemmBackend::Blas;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CHECK(chosen(dt, M, N, K, ta, tb) != GemmBackend::Blas);
      CHECK(chosen(dt, M + 1, N, K, ta, tb) == large);
    }
  check_gemm<T>(M, N, K);
  check_gemm<T>(M + 1, N, K);
  check_matmul_backward<T>(M, N, K);
  check_matmul_backward<T>(M + 1, N, K);
}

TEMPLATE_TEST_CASE("thresholds: GEMM, libxsmm's minimum column count", "[thresholds][gemm]", float, double) {
  using T = TestType;
  const Dtype dt = dtype_for<T>();
  constexpr std::int64_t M = 24, K = 32;  // K·sizeof(T) <= 256: NT stays eligible for libxsmm
  const std::int64_t n = detail::kXsmmMinN;
  REQUIRE(n % detail::xsmm_column_multiple(dt) == 0);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CHECK(chosen(dt, M, n - 1, K, ta, tb) == GemmBackend::Eigen);
      CHECK(chosen(dt, M, n, K, ta, tb) == (detail::xsmm_available() ? GemmBackend::Xsmm : GemmBackend::Eigen));
    }
  check_gemm<T>(M, n - 1, K);
  check_gemm<T>(M, n, K);
}

TEMPLATE_TEST_CASE("thresholds: GEMM, libxsmm's limit on K with B transposed", "[thresholds][gemm]", float, double) {
  using T = TestType;
  const Dtype dt = dtype_for<T>();
  constexpr std::int64_t M = 20, N = 16;
  const std::int64_t k = detail::kXsmmMaxTransposedKBytes / static_cast<std::int64_t>(sizeof(T));
  const GemmBackend small = detail::xsmm_available() ? GemmBackend::Xsmm : GemmBackend::Eigen;
  for (bool ta : {false, true}) {
    CHECK(chosen(dt, M, N, k, ta, true) == small);
    CHECK(chosen(dt, M, N, k + 1, ta, true) == GemmBackend::Eigen);
    CHECK(chosen(dt, M, N, k + 1, ta, false) == small);  // no panel without B transposed
  }
  check_gemm<T>(M, N, k);
  check_gemm<T>(M, N, k + 1);
}

TEMPLATE_TEST_CASE("thresholds: GEMM, libxsmm's column multiple", "[thresholds][gemm]", float, double) {
  using T = TestType;
  const Dtype dt = dtype_for<T>();
  constexpr std::int64_t M = 12, K = 40;
  const std::int64_t mult = detail::xsmm_column_multiple(dt);
  const std::int64_t n = (2 * detail::kXsmmMinN + mult - 1) / mult * mult;  // a multiple, >= kXsmmMinN
  const GemmBackend small = detail::xsmm_available() ? GemmBackend::Xsmm : GemmBackend::Eigen;
  CHECK(chosen(dt, M, n, K) == small);
  CHECK(chosen(dt, M, n + 1, K) == (mult > 1 ? GemmBackend::Eigen : small));
  check_gemm<T>(M, n, K);
  check_gemm<T>(M, n + 1, K);
}

TEMPLATE_TEST_CASE("thresholds: GEMM, xsmm_gemm's dimension limit (forced libxsmm)", "[thresholds][gemm]", float,
                   double) {
  using T = TestType;
  if (!detail::xsmm_available()) {
    WARN("skipped: libxsmm generates no kernels on this CPU");
    return;
  }
  // M at the limit: xsmm_gemm declines and detail::gemm falls back to Eigen (N = K = 1: C is
  // one column of 2^20 values)
  constexpr std::int64_t N = 1, K = 1;
  const std::int64_t m = detail::kXsmmMaxDim;
  {
    const Tensor a = pattern<T>({m, K}, 71), b = pattern<T>({K, N}, 72);
    Tensor c = Tensor::empty({m, N}, dtype_for<T>());
    CHECK(detail::xsmm_gemm(false, false, a.data<T>(), b.data<T>(), c.data<T>(), m - 1, N, K, false));
    CHECK_FALSE(detail::xsmm_gemm(false, false, a.data<T>(), b.data<T>(), c.data<T>(), m, N, K, false));
  }
  ForceGuard fg;
  detail::force_gemm_backend(GemmBackend::Xsmm);
  check_gemm<T>(m - 1, N, K);
  check_gemm<T>(m, N, K);
}
