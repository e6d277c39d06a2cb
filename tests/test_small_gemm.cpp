// The unpacked float32 kernel for small products, against a float64 reference product over
// every transpose combination, ragged row and column tails, and accumulation.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/ops/small_gemm.h"
#include "core/tensor.h"

using tapegrad::detail::small_sgemm;
using tapegrad::detail::small_sgemm_available;
using tapegrad::detail::small_sgemm_suits;

namespace {

// op(A)(i, k) and op(B)(k, j) for row-major A ((M, K), or (K, M) when ta) and B ((K, N), or
// (N, K) when tb).
double a_at(const std::vector<float>& A, bool ta, std::int64_t M, std::int64_t K, std::int64_t i, std::int64_t k) {
  return ta ? A[k * M + i] : A[i * K + k];
}
double b_at(const std::vector<float>& B, bool tb, std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t j) {
  return tb ? B[j * K + k] : B[k * N + j];
}

void check_product(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate) {
  std::mt19937 gen(static_cast<unsigned>(M * 1000003 + N * 1009 + K * 7 + ta * 2 + tb));
  std::normal_distribution<float> nd;
  std::vector<float> A(static_cast<std::size_t>(M * K)), B(static_cast<std::size_t>(K * N)),
      C(static_cast<std::size_t>(M * N));
  for (auto& v : A) v = nd(gen);
  for (auto& v : B) v = nd(gen);
  for (auto& v : C) v = nd(gen);
  const std::vector<float> C0 = C;
  small_sgemm(ta, tb, A.data(), B.data(), C.data(), M, N, K, accumulate);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double want = accumulate ? C0[static_cast<std::size_t>(i * N + j)] : 0.0, scale = std::fabs(want);
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = a_at(A, ta, M, K, i, k) * b_at(B, tb, K, N, k, j);
        want += p;
        scale += std::fabs(p);
      }
      const double got = C[static_cast<std::size_t>(i * N + j)];
      INFO("ta " << ta << " tb " << tb << " M " << M << " N " << N << " K " << K << " acc " << accumulate << " at ("
                 << i << ", " << j << ")");
      // float32 rounding of K products and sums: at most about (K + 2)·2⁻²³ of Σ|terms|
      REQUIRE(std::fabs(got - want) <= static_cast<double>(K + 2) * 1.2e-7 * scale + 1e-30);
    }
}

}  // namespace

TEST_CASE("small_sgemm equals the float64 product for every transpose, tail and accumulation", "[matmul][small_gemm]") {
  if (!small_sgemm_available()) {
    CHECK_FALSE(small_sgemm_suits(32, 128, 50));
    CHECK_THROWS_AS(small_sgemm(false, false, nullptr, nullptr, nullptr, 1, 32, 1, false), std::logic_error);
    return;
  }
  // the chapter's shapes, then ragged ones: rows past a block of 8, columns past 32 and
  // past the in-place width, K of 1
  const std::int64_t shapes[][3] = {{32, 128, 50}, {32, 64, 128}, {32, 32, 64}, {128, 50, 32}, {1, 32, 32},
                                    {32, 32, 1},   {13, 33, 7},   {9, 200, 17}, {3, 47, 65},   {17, 160, 3}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (bool acc : {false, true}) check_product(t & 1, t & 2, s[0], s[1], s[2], acc);
}

TEST_CASE("small_sgemm takes only the shapes it is fast at", "[matmul][small_gemm]") {
  if (!small_sgemm_available()) return;
  CHECK(small_sgemm_suits(32, 128, 50));
  CHECK_FALSE(small_sgemm_suits(32, 1, 32));               // a matrix-vector product
  CHECK_FALSE(small_sgemm_suits(32, 16, 64));              // fewer columns than one block
  CHECK_FALSE(small_sgemm_suits(1024, 4096, 4096));        // a large product: BLAS
  CHECK_FALSE(small_sgemm_suits(4, 64, 4096));             // a panel that would not stay in cache
}
