// Eigen's packed GEMM for the small products libxsmm does not take (core/ops/gemm_backends.h),
// compiled once per ISA level (core/kernels/gemm_eigen.h; every file of core/kernels/cpu/):
// Eigen picks its packet width and kernel blocking from the translation unit's flags.
#include <tapegrad/core/kernels/isa_dispatch.h>
// Every Eigen symbol of this variant lives in Eigen_<level> (no Eigen header was included
// before this line in this translation unit).
#define Eigen TAPEGRAD_ISA_CAT(Eigen_, TAPEGRAD_ISA_NS)
#include <Eigen/Core>

#include <tapegrad/core/kernels/gemm_eigen.h>
#include <tapegrad/core/ops/gemm_backends.h>
#include <tapegrad/core/parallel.h>

namespace tapegrad::detail::TAPEGRAD_ISA_NS {
namespace {
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

// Eigen runs a product on the calling thread, except a large one (above kGemmSmallMaxFlops,
// when OpenBLAS is a fallback) called outside a parallel region, which it spreads over
// tapegrad's threads.
template <class T>
void eigen_gemm(bool ta, bool tb, const T* A, const T* B, T* C, std::int64_t M, std::int64_t N, std::int64_t K,
                std::int64_t ar, std::int64_t ac, std::int64_t br, std::int64_t bc, bool acc) {
  // Eigen only ever sees products below the BLAS crossover serially: a parallel region would
  // cost more than such a product.
  static const bool eigen_serial = (Eigen::setNbThreads(1), true);
  (void)eigen_serial;
  Eigen::Map<const RowMat<T>> a(A, ar, ac);
  Eigen::Map<const RowMat<T>> b(B, br, bc);
  Eigen::Map<RowMat<T>> c(C, M, N);
  struct Threads {  // Eigen's thread count is global: set it for this call only
    int n;  // the thread count, read once
    bool set;
    explicit Threads(bool large)
        : n(large && !in_parallel_region() && omp_get_num_threads_wrapper() == 1 ? get_num_threads() : 1), set(n > 1) {
      if (set) Eigen::setNbThreads(n);
    }
    ~Threads() {
      if (set) Eigen::setNbThreads(1);
    }
  } threads(M * N * K > kGemmSmallMaxFlops);
  if (!acc) c.setZero();
  if (!ta && !tb) c.noalias() += a * b;
  else if (!ta && tb) c.noalias() += a * b.transpose();
  else if (ta && !tb) c.noalias() += a.transpose() * b;
  else c.noalias() += a.transpose() * b.transpose();
}

TAPEGRAD_REGISTER_KERNELS(GemmEigenKernels, gemm_eigen, .gemm = &eigen_gemm<T>)

}  // namespace tapegrad::detail::TAPEGRAD_ISA_NS
