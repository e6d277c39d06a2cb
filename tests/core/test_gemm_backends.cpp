// Every backend behind detail::gemm (libxsmm, Eigen, OpenBLAS) against a float64 reference
// product: float32 and float64, every transpose combination, ragged sizes, accumulation.
// Runs on whichever ISA the build targets (CI builds an AVX2 path as well as the native one).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include <tapegrad/core/isa.h>
#include <tapegrad/core/ops/gemm_backends.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/tensor.h>

using namespace tapegrad;
using detail::GemmBackend;

namespace {

struct Forced {  // forces one backend for the scope
  explicit Forced(GemmBackend b) { detail::force_gemm_backend(b); }
  ~Forced() { detail::force_gemm_backend(GemmBackend::Auto); }
};

template <class T>
Tensor random_matrix(std::int64_t r, std::int64_t c, Dtype dt, std::mt19937& gen) {
  std::normal_distribution<double> nd;
  Tensor t = Tensor::empty({r, c}, dt);
  T* p = t.data<T>();
  for (std::int64_t i = 0; i < r * c; ++i) p[i] = static_cast<T>(nd(gen));
  return t;
}

// op(A) (M, K) · op(B) (K, N) (+ C0) through detail::gemm on the given backend, each entry
// against the float64 sum within the rounding of K products in T.
template <class T>
void check_product(GemmBackend backend, Dtype dt, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                   bool acc) {
  std::mt19937 gen(static_cast<unsigned>(M * 1000003 + N * 1009 + K * 7 + ta * 2 + tb));
  Tensor a = ta ? random_matrix<T>(K, M, dt, gen) : random_matrix<T>(M, K, dt, gen);
  Tensor b = tb ? random_matrix<T>(N, K, dt, gen) : random_matrix<T>(K, N, dt, gen);
  Tensor c = random_matrix<T>(M, N, dt, gen);
  Tensor c0 = c.clone();
  {
    Forced f(backend);
    detail::gemm(ta, tb, a, b, c, acc);
  }
  const T *A = a.data<T>(), *B = b.data<T>(), *C = c.data<T>(), *C0 = c0.data<T>();
  const double eps = sizeof(T) == 4 ? 1.2e-7 : 2.3e-16;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double want = acc ? double(C0[i * N + j]) : 0.0, scale = std::fabs(want);
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = double(ta ? A[k * M + i] : A[i * K + k]) * double(tb ? B[j * K + k] : B[k * N + j]);
        want += p;
        scale += std::fabs(p);
      }
      const double got = C[i * N + j];
      if (std::fabs(got - want) > double(K + 2) * eps * scale + 1e-300) {
        FAIL_CHECK(detail::gemm_backend_name(backend)
                   << " " << dtype_name(dt) << " ta " << ta << " tb " << tb << " M " << M << " N " << N << " K " << K
                   << " acc " << acc << " at (" << i << ", " << j << "): got " << got << ", want " << want);
        return;
      }
    }
}

// the chapter's net [50,128,64,32,1] at batch 32 (forward NT, backward NN and TN), then
// ragged sizes: one row, one column, K of 1, odd sizes past vector widths
const std::int64_t kShapes[][3] = {{32, 128, 50}, {32, 64, 128}, {32, 1, 32}, {32, 50, 128}, {128, 50, 32},
                                   {1, 32, 32},   {32, 32, 1},   {13, 33, 7}, {9, 200, 17},  {3, 47, 65},
                                   {17, 160, 3},  {1, 1, 1},     {65, 9, 31}};

}  // namespace

TEST_CASE("every gemm backend equals the float64 product (all transposes, ragged, accumulate)", "[matmul][gemm]") {
  for (GemmBackend backend : {GemmBackend::Xsmm, GemmBackend::Eigen, GemmBackend::Blas, GemmBackend::Auto})
    for (const auto& s : kShapes)
      for (int t = 0; t < 4; ++t)
        for (bool acc : {false, true}) {
          check_product<float>(backend, Dtype::Float32, t & 1, t & 2, s[0], s[1], s[2], acc);
          check_product<double>(backend, Dtype::Float64, t & 1, t & 2, s[0], s[1], s[2], acc);
        }
}

TEST_CASE("libxsmm kernels are cached per shape and stay exact when shapes interleave", "[matmul][gemm]") {
  // the same shapes again in another order (a stale cached kernel would give wrong sizes)
  for (int rep = 0; rep < 2; ++rep)
    for (int i = 12; i >= 0; i -= 3)
      check_product<float>(GemmBackend::Xsmm, Dtype::Float32, false, rep == 1, kShapes[i][0], kShapes[i][1],
                           kShapes[i][2], rep == 0);
}

TEST_CASE("gemm takes libxsmm for small products, Eigen for thin ones, OpenBLAS for large ones", "[matmul][gemm]") {
  if (!detail::xsmm_available()) {
    CHECK(detail::chosen_gemm_backend(Dtype::Float32, 32, 128, 50) == GemmBackend::Eigen);
    return;
  }
  INFO("libxsmm target " << detail::xsmm_target());
#if defined(__AVX2__) && !defined(__AVX512F__)
  if (!std::getenv("LIBXSMM_TARGET")) CHECK(std::string(detail::xsmm_target()) == "hsw");
#endif
  CHECK(detail::chosen_gemm_backend(Dtype::Float32, 32, 128, 50) == GemmBackend::Xsmm);
  CHECK(detail::chosen_gemm_backend(Dtype::Float64, 128, 50, 32) == GemmBackend::Xsmm);
  CHECK(detail::chosen_gemm_backend(Dtype::Float32, 32, 1, 32) == GemmBackend::Eigen);   // matrix-vector
  CHECK(detail::chosen_gemm_backend(Dtype::Float32, 32, 128, 50, false, true) == GemmBackend::Xsmm);
  CHECK(detail::chosen_gemm_backend(Dtype::Float32, 32, 64, 128, false, true) == GemmBackend::Eigen);  // wide panel
  CHECK(detail::chosen_gemm_backend(Dtype::Float64, 32, 128, 50, false, true) == GemmBackend::Eigen);
  INFO("OpenBLAS core " << detail::blas_core_name());
  CHECK(detail::chosen_gemm_backend(Dtype::Float32, 1024, 1024, 1024) ==
        (detail::blas_is_fallback() ? GemmBackend::Eigen : GemmBackend::Blas));
  CHECK(detail::forced_gemm_backend() == GemmBackend::Auto);
}

TEST_CASE("OpenBLAS counts as a fallback only when its kernel set is older than the CPU's AVX2", "[matmul][gemm]") {
  const std::string core = detail::blas_core_name();
  INFO("OpenBLAS core " << core << ", kernels' ISA level " << isa_name(isa()));
  // AVX2 as the kernels run it (core/isa.h): forced to baseline, no kernel set is a fallback
  if (isa() < Isa::Avx2) {
    CHECK_FALSE(detail::blas_is_fallback());
  } else {
    const bool modern = core == "Haswell" || core == "Zen" || core == "SkylakeX" || core == "Cooperlake" ||
                        core == "SapphireRapids";
    CHECK(detail::blas_is_fallback() == !modern);
  }
}

TEST_CASE("large products in Eigen on 2 threads (the path taken when OpenBLAS is a fallback) are exact",
          "[matmul][gemm]") {
  const int before = get_num_threads();
  set_num_threads(2);
  for (int t = 0; t < 4; ++t) {
    check_product<float>(GemmBackend::Eigen, Dtype::Float32, t & 1, t & 2, 203, 257, 181, t == 3);
    check_product<double>(GemmBackend::Eigen, Dtype::Float64, t & 1, t & 2, 181, 203, 257, t == 0);
  }
  set_num_threads(before);
}
