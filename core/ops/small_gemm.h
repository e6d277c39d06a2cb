#pragma once
// Float32 matrix products of the sizes small MLPs run at (batch 32, widths up to a few
// hundred), without packing: C (M, N) (+)= op(A) · op(B), all row-major. A register block
// of 8 rows × 32 columns accumulates over k, broadcasting op(A)'s elements and loading
// op(B)'s rows straight from memory (a transposed or wide B goes through a per-thread (K, 32)
// panel first). On AVX-512 this runs 1.3-1.8× Eigen's packed kernel at these shapes; without
// AVX-512 it is not built and the callers use Eigen.
#include <cstdint>

namespace tapegrad::detail {

/// Whether small_sgemm is compiled for this machine (AVX-512).
bool small_sgemm_available();

/// Whether small_sgemm should take a product of op(A) (M, K) · op(B) (K, N): AVX-512, at
/// least 32 output columns, and small enough that a 32-column panel of op(B) stays in cache.
bool small_sgemm_suits(std::int64_t M, std::int64_t N, std::int64_t K);

/// C (M, N), row-major, leading dimension N: C = op(A)·op(B), or C += op(A)·op(B) when
/// `accumulate`. A is (M, K) row-major, or (K, M) when `ta`; B is (K, N), or (N, K) when
/// `tb`. Throws std::logic_error when not available.
void small_sgemm(bool ta, bool tb, const float* A, const float* B, float* C, std::int64_t M, std::int64_t N,
                 std::int64_t K, bool accumulate);

}  // namespace tapegrad::detail
