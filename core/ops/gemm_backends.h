#pragma once
// The backends behind detail::gemm (core/ops/matmul.h) and how it picks one.
//   Xsmm   libxsmm 1.17: a kernel generated at run time for the CPU's ISA (SSE to AVX-512)
//          and the exact (M, N, K), cached per thread. Small products.
//   Eigen  Eigen's packed kernel: fallback for small products libxsmm does not take
//          (fewer than 8 output columns, or no kernel for this CPU).
//   Blas   OpenBLAS cblas_?gemm: large products, spread over the threads, unless OpenBLAS
//          runs a fallback kernel set on this CPU (blas_is_fallback()): then Eigen, on
//          tapegrad's threads.
// The crossovers were measured on both ISA builds; see chosen_gemm_backend().
#include <cstdint>

#include <tapegrad/core/dtype.h>

namespace tapegrad::detail {

enum class GemmBackend { Auto, Xsmm, Eigen, Blas };

/// Name of a backend ("auto", "libxsmm", "eigen", "openblas").
const char* gemm_backend_name(GemmBackend b);

// ---- the crossovers chosen_gemm_backend() applies, in its order ---------------------------

/// Above this many multiply-adds (M·N·K > 2^22) a product goes to OpenBLAS (Eigen when
/// blas_is_fallback()), spread over the threads; up to it, it stays on the calling thread.
/// Measured 1 thread, Sapphire Rapids, both ISA builds.
constexpr std::int64_t kGemmSmallMaxFlops = std::int64_t(1) << 22;
/// A small product with fewer output columns N than this goes to Eigen: libxsmm vectorises
/// along C's rows (N = 1: 8 vs 14 GFLOP/s with AVX-512).
constexpr std::int64_t kXsmmMinN = 8;
/// With B transposed (NT, TT), libxsmm only while a row of op(B)ᵀ is at most 256 bytes
/// (K·sizeof(T) <= 256): beyond it the transposed (K, N) panel costs more than it wins.
constexpr std::int64_t kXsmmMaxTransposedKBytes = 256;
/// libxsmm takes a small product only when N is a multiple of this (1: any N). 8 for
/// float32 when the kernels' level (isa(), core/isa.h) is below AVX-512 (an 8-float vector:
/// N = 50 ran at 48 vs Eigen's 62 GFLOP/s), else 1. Depends on the level, hence a function.
std::int64_t xsmm_column_multiple(Dtype dtype);
/// xsmm_gemm declines (returns false) when M, N or K reaches 2^20 (its kernel cache key has
/// 20 bits each); the products chosen_gemm_backend() sends it are far smaller.
constexpr std::int64_t kXsmmMaxDim = std::int64_t(1) << 20;

/// The backend detail::gemm takes for C (M, N) = op(A) (M, K) · op(B) (K, N) when not forced
/// (`ta`, `tb`: whether A, B are transposed).
GemmBackend chosen_gemm_backend(Dtype dtype, std::int64_t M, std::int64_t N, std::int64_t K, bool ta = false,
                                bool tb = false);

/// Forces every detail::gemm call on the calling thread to one backend (Auto restores the
/// choice by shape). For tests and benchmarks; Xsmm falls back to Eigen when libxsmm has no
/// kernel for this CPU (xsmm_available() says whether it has).
void force_gemm_backend(GemmBackend b);
GemmBackend forced_gemm_backend();

/// The kernel set OpenBLAS picked for this CPU (openblas_get_corename(), e.g. "Haswell",
/// "SkylakeX", "Prescott"); the OPENBLAS_CORETYPE environment variable overrides its choice.
const char* blas_core_name();

/// True when the CPU has AVX2 + FMA but OpenBLAS runs an older kernel set (OpenBLAS 0.3.21
/// gives CPU models it does not know, e.g. Sapphire Rapids, its SSE3 "Prescott" kernels, 4-5x
/// slower); large products then go to Eigen instead. Computed once.
bool blas_is_fallback();

/// Whether libxsmm generates kernels on this CPU (x86-64 with at least SSE3).
bool xsmm_available();

/// The ISA libxsmm generates code for, e.g. "hsw" (AVX2) or "cpx"/"spr" (AVX-512). Capped at
/// the kernels' level (isa(), core/isa.h): "hsw" for avx2, "wsm" for baseline, unless the
/// LIBXSMM_TARGET environment variable says otherwise.
const char* xsmm_target();

/// C (M, N) row-major = op(A)·op(B), or += when `accumulate`; A (M, K) row-major, (K, M) when
/// `ta`; B (K, N), (N, K) when `tb`. NN and TN map straight onto libxsmm's column-major
/// kernels; libxsmm 1.17 generates no kernel for the NT case (its TRANS_A), so op(B) is first
/// transposed into a per-thread (K, N) panel. Returns false (C untouched) when libxsmm has no
/// kernel for this shape or CPU.
bool xsmm_gemm(bool ta, bool tb, const float* A, const float* B, float* C, std::int64_t M, std::int64_t N,
               std::int64_t K, bool accumulate);
bool xsmm_gemm(bool ta, bool tb, const double* A, const double* B, double* C, std::int64_t M, std::int64_t N,
               std::int64_t K, bool accumulate);

}  // namespace tapegrad::detail
