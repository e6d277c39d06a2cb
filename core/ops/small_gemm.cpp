#include "core/ops/small_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace tapegrad::detail {

#if defined(__AVX512F__)
namespace {

constexpr int kW = 16;       // floats per vector
constexpr int kCols = 2 * kW;  // columns per register block
constexpr int kRows = 8;     // rows per register block: 16 accumulators
// Widest untransposed B read in place; wider rows are copied into a panel first.
constexpr std::int64_t kDirectMaxN = 128;

// C[0:R, 0:cols] (+)= Σ_k a(r, k) · B[k, 0:kCols], a(r, k) = A[r·sr + k·sk], B rows ldb apart
// (kCols readable floats each), C rows ldc apart; cols <= kCols (C's access is masked).
template <int R>
void block(const float* A, std::int64_t sr, std::int64_t sk, const float* B, std::int64_t ldb, float* C,
           std::int64_t ldc, std::int64_t K, int cols, bool acc) {
  __m512 c0[R], c1[R];
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_loadu_ps(B + k * ldb), b1 = _mm512_loadu_ps(B + k * ldb + kW);
    const float* a = A + k * sk;
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * sr]);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
  const __mmask16 m0 = cols >= kW ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= kCols ? __mmask16(0xFFFF) : cols <= kW ? __mmask16(0) : __mmask16((1u << (cols - kW)) - 1);
  for (int r = 0; r < R; ++r) {
    float* cr = C + r * ldc;
    if (acc) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, cr));
      c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, cr + kW));
    }
    _mm512_mask_storeu_ps(cr, m0, c0[r]);
    _mm512_mask_storeu_ps(cr + kW, m1, c1[r]);
  }
}

using BlockFn = void (*)(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, float*, std::int64_t,
                         std::int64_t, int, bool);
constexpr BlockFn kTail[kRows] = {nullptr, block<1>, block<2>, block<3>, block<4>, block<5>, block<6>, block<7>};

// dst (cols, rows) = src (rows, cols)ᵀ, src rows lds apart, dst rows ldd apart: 8×8 tiles
// in registers, scalar edges.
void transpose(const float* src, std::int64_t rows, std::int64_t cols, std::int64_t lds, float* dst,
               std::int64_t ldd) {
  std::int64_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    std::int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      __m256 r[8], t[8], s[8];
      for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(src + (i + q) * lds + j);
      for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
        t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
      }
      for (int q = 0; q < 8; q += 4) {
        s[q] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      for (int q = 0; q < 4; ++q) {
        _mm256_storeu_ps(dst + (j + q) * ldd + i, _mm256_permute2f128_ps(s[q], s[q + 4], 0x20));
        _mm256_storeu_ps(dst + (j + q + 4) * ldd + i, _mm256_permute2f128_ps(s[q], s[q + 4], 0x31));
      }
    }
    for (; j < cols; ++j)
      for (int q = 0; q < 8; ++q) dst[j * ldd + i + q] = src[(i + q) * lds + j];
  }
  for (; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

}  // namespace

bool small_sgemm_available() { return true; }

bool small_sgemm_suits(std::int64_t M, std::int64_t N, std::int64_t K) {
  // a (K, 32) panel of op(B) within L2; below 32 columns Eigen's kernels are faster
  return N >= kCols && K <= 1024 && M * N * K <= (std::int64_t(1) << 22) && M > 0;
}

void small_sgemm(bool ta, bool tb, const float* A, const float* B, float* C, std::int64_t M, std::int64_t N,
                 std::int64_t K, bool accumulate) {
  const std::int64_t sr = ta ? 1 : K, sk = ta ? M : 1;  // a(i, k) = A[i·sr + k·sk]
  thread_local std::vector<float> buf;
  if (buf.size() < static_cast<std::size_t>(K * kCols)) buf.resize(static_cast<std::size_t>(K * kCols));
  float* const panel_buf = buf.data();
  for (std::int64_t j = 0; j < N; j += kCols) {
    const int cols = static_cast<int>(std::min<std::int64_t>(kCols, N - j));
    // op(B)[:, j:j+kCols] as K rows: read in place when B is untransposed, its rows are
    // short enough not to alias in L1, and the block is whole; otherwise a packed copy,
    // zero-padded, so the kernel's loads stay unmasked.
    const float* panel = B + j;
    std::int64_t ldp = N;
    if (tb) {
      transpose(B + j * K, cols, K, K, panel_buf, kCols);
      for (std::int64_t k = 0; k < K; ++k) std::fill(panel_buf + k * kCols + cols, panel_buf + (k + 1) * kCols, 0.0f);
      panel = panel_buf;
      ldp = kCols;
    } else if (cols < kCols || N > kDirectMaxN) {
      for (std::int64_t k = 0; k < K; ++k) {
        std::copy(B + k * N + j, B + k * N + j + cols, panel_buf + k * kCols);
        std::fill(panel_buf + k * kCols + cols, panel_buf + (k + 1) * kCols, 0.0f);
      }
      panel = panel_buf;
      ldp = kCols;
    }
    std::int64_t i = 0;
    for (; i + kRows <= M; i += kRows) block<kRows>(A + i * sr, sr, sk, panel, ldp, C + i * N + j, N, K, cols, accumulate);
    if (i < M) kTail[M - i](A + i * sr, sr, sk, panel, ldp, C + i * N + j, N, K, cols, accumulate);
  }
}

#else

bool small_sgemm_available() { return false; }
bool small_sgemm_suits(std::int64_t, std::int64_t, std::int64_t) { return false; }
void small_sgemm(bool, bool, const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t, bool) {
  throw std::logic_error("small_sgemm: built without AVX-512");
}

#endif

}  // namespace tapegrad::detail
