// Small products through libxsmm's generated kernels (core/ops/gemm_backends.h).
#include <libxsmm.h>

#include <Eigen/Core>
#include <cstdlib>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <tapegrad/core/isa.h>
#include <tapegrad/core/kernels/isa_dispatch.h>
#include <tapegrad/core/ops/gemm_backends.h>

namespace tapegrad::detail {
namespace {

void init_once() {
  static std::once_flag flag;
  std::call_once(flag, [] {
    libxsmm_init();  // first: its set-up sets the target from the CPU (or LIBXSMM_TARGET)
    // Capped at the kernels' level (core/isa.h: TAPEGRAD_ISA, set_isa, or the level of a
    // build compiled for one): forced to AVX2, libxsmm runs AVX2 code also on an AVX-512 CPU.
    // LIBXSMM_TARGET, when set, wins.
    if (!std::getenv("LIBXSMM_TARGET")) {
      if (isa() == Isa::Avx2) libxsmm_set_target_arch("hsw");
      else if (isa() == Isa::Baseline) libxsmm_set_target_arch("wsm");  // SSE4.2, x86-64-v2
    }
  });
}

// libxsmm's dispatch for T (float: smm, double: dmm); `flags` says the transposes and
// whether C is overwritten (BETA_0) or accumulated into.
template <class T>
struct Kernel {
  using fn = std::conditional_t<std::is_same_v<T, float>, libxsmm_smmfunction, libxsmm_dmmfunction>;
  static fn dispatch(libxsmm_blasint m, libxsmm_blasint n, libxsmm_blasint k, libxsmm_blasint lda, libxsmm_blasint ldb,
                     libxsmm_blasint ldc, int flags) {
    const T alpha = 1, beta = (flags & LIBXSMM_GEMM_FLAG_BETA_0) ? 0 : 1;
    if constexpr (std::is_same_v<T, float>)
      return libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
    else
      return libxsmm_dmmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
  }
};

// libxsmm keeps its own registry of generated kernels (thread-safe, behind a lock); this
// per-thread map in front of it makes a repeated shape one hash lookup without locking.
template <class T>
typename Kernel<T>::fn kernel(bool tb_col, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                              std::int64_t ldb, bool acc) {
  thread_local std::unordered_map<std::uint64_t, typename Kernel<T>::fn> cache;
  // m, n, k < 2^20 (callers send small products only); lda, ldb follow from them
  const std::uint64_t key = (std::uint64_t(m) << 42) | (std::uint64_t(n) << 22) | (std::uint64_t(k) << 2) |
                            (std::uint64_t(tb_col) << 1) | std::uint64_t(acc);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  init_once();
  const int flags = (tb_col ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (acc ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
  auto f = Kernel<T>::dispatch(m, n, k, lda, ldb, m, flags);
  cache.emplace(key, f);
  return f;
}

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
bool run(bool ta, bool tb, const T* A, const T* B, T* C, std::int64_t M, std::int64_t N, std::int64_t K, bool acc) {
  if (M >= kXsmmMaxDim || N >= kXsmmMaxDim || K >= kXsmmMaxDim) return false;
  // Row-major C (M, N) is column-major Cᵀ (N, M) = op(B)ᵀ · op(A)ᵀ: libxsmm's m = N, n = M,
  // its A is our B and its B is our A. Our ta is its TRANS_B (supported); our tb would be
  // its TRANS_A, which 1.17 does not generate: transpose B into a (K, N) panel instead.
  const std::int64_t lda = N, ldb = ta ? M : K;
  auto f = kernel<T>(ta, N, M, K, lda, ldb, acc);
  if (!f) return false;
  if (tb) {
    thread_local std::vector<T> panel;
    if (panel.size() < static_cast<std::size_t>(K * N)) panel.resize(static_cast<std::size_t>(K * N));
    // libxsmm's generated transpose (Eigen's compiled to a scalar strided loop: 20% of the
    // chapter step's GEMM time with AVX2); column-major (K, N) in -> (N, K) out
    libxsmm_otrans(panel.data(), B, sizeof(T), K, N, K, N);
    f(panel.data(), A, C);
  } else {
    f(B, A, C);
  }
  // libxsmm's generated AVX2/AVX-512 kernels return without vzeroupper (isa_dispatch.h)
  clear_upper_state();
  return true;
}

}  // namespace

bool xsmm_available() {
  static const bool ok = (init_once(), libxsmm_get_target_archid() >= LIBXSMM_X86_SSE3);
  return ok;
}

const char* xsmm_target() {
  init_once();
  return libxsmm_get_target_arch();
}

bool xsmm_gemm(bool ta, bool tb, const float* A, const float* B, float* C, std::int64_t M, std::int64_t N,
               std::int64_t K, bool accumulate) {
  return run<float>(ta, tb, A, B, C, M, N, K, accumulate);
}
bool xsmm_gemm(bool ta, bool tb, const double* A, const double* B, double* C, std::int64_t M, std::int64_t N,
               std::int64_t K, bool accumulate) {
  return run<double>(ta, tb, A, B, C, M, N, K, accumulate);
}

}  // namespace tapegrad::detail
