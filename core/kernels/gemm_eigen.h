#pragma once
// Internal: Eigen's packed GEMM, compiled once per ISA level (core/ops/gemm_eigen.cpp; see
// core/kernels/isa_dispatch.h). Each variant renames namespace Eigen to Eigen_<level>, so
// the Eigen templates it instantiates are its own symbols (Eigen's thread count too).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::detail {

/// C (M, N) = op(A)·op(B), or += when `acc`; A is (ar, ac) row-major, B (br, bc); on the
/// calling thread, or spread over tapegrad's threads for a product above kGemmSmallMaxFlops
/// called outside a parallel region.
#define TAPEGRAD_EIGEN_GEMM_DECLS(ns)                                                                            \
  namespace ns {                                                                                                 \
  template <class T>                                                                                             \
  void eigen_gemm(bool ta, bool tb, const T* A, const T* B, T* C, std::int64_t M, std::int64_t N, std::int64_t K, \
                  std::int64_t ar, std::int64_t ac, std::int64_t br, std::int64_t bc, bool acc);                 \
  }
TAPEGRAD_ISA_FOR_EACH_VARIANT(TAPEGRAD_EIGEN_GEMM_DECLS)

}  // namespace tapegrad::detail
