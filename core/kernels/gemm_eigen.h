#pragma once
// Internal: Eigen's packed GEMM, a kernel family of one member (core/kernels/isa_dispatch.h),
// defined once per ISA level in core/kernels/cpu/gemm_eigen.cpp. Each variant renames namespace
// Eigen to Eigen_<level>, so the Eigen templates it instantiates are its own symbols (Eigen's
// thread count too).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::detail {

/// Eigen's GEMM of one ISA level.
template <class T>
struct GemmEigenKernels {
  /// C (M, N) = op(A)·op(B), or += when `acc`; A is (ar, ac) row-major, B (br, bc); on the
  /// calling thread, or spread over tapegrad's threads for a product above kGemmSmallMaxFlops
  /// called outside a parallel region.
  void (*gemm)(bool ta, bool tb, const T* A, const T* B, T* C, std::int64_t M, std::int64_t N, std::int64_t K,
               std::int64_t ar, std::int64_t ac, std::int64_t br, std::int64_t bc, bool acc);
};
TAPEGRAD_DECLARE_KERNELS(GemmEigenKernels, gemm_eigen)

}  // namespace tapegrad::detail
