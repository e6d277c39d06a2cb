// Matrix products: forward and backward side by side.
#include <tapegrad/core/ops/matmul.h>

#include <cblas.h>

#include <type_traits>

#include <algorithm>
#include <cctype>
#include <string>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/kernels/gemm_eigen.h>
#include <tapegrad/core/kernels/pointwise.h>
#include <tapegrad/core/ops/gemm_backends.h>
#include <tapegrad/core/ops/kernels.h>
#include <tapegrad/core/ops/reduce.h>
#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/core/parallel.h>

extern "C" char* openblas_get_corename(void);  // OpenBLAS's own API (not in cblas.h)

namespace tapegrad {
namespace detail {
namespace {

// The crossovers kGemmSmallMaxFlops, kXsmmMinN, kXsmmMaxTransposedKBytes and
// xsmm_column_multiple() are in core/ops/gemm_backends.h (measured: see README, "Performance").
thread_local GemmBackend forced = GemmBackend::Auto;

// OpenBLAS 0.3.21's dynamic dispatch picks its kernels by CPU model; a model it does not
// know (Sapphire Rapids, for one) gets the SSE3 "Prescott" kernels, which run 4-5x slower
// than AVX2/AVX-512 code (measured 26-28 against 120-146 GFLOP/s at 128x784x256 to 2048^3,
// 1 thread). A kernel set older than the CPU's ISA counts as a fallback.
bool compute_blas_is_fallback() {
  if (isa() < Isa::Avx2) return false;  // the kernels' level (core/isa.h): AVX2 + FMA or more
  std::string core = blas_core_name();
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const char* ok : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (core == ok) return false;
  return true;
}

// C = op(A)·op(B) (or +=) on `use`; libxsmm falls back to Eigen when it has no kernel.
template <class T>
void run_gemm(GemmBackend use, bool ta, bool tb, const Tensor& a, const Tensor& b, Tensor& c, std::int64_t M,
              std::int64_t N, std::int64_t K, bool accumulate) {
  const std::int64_t ar = a.shape()[0], ac = a.shape()[1], br = b.shape()[0], bc = b.shape()[1];
  const T *A = a.data<T>(), *B = b.data<T>();
  T* C = c.data<T>();
  if (use == GemmBackend::Xsmm && !xsmm_gemm(ta, tb, A, B, C, M, N, K, accumulate)) use = GemmBackend::Eigen;
  if (use == GemmBackend::Eigen) {
    gemm_eigen<T>().gemm(ta, tb, A, B, C, M, N, K, ar, ac, br, bc, accumulate);  // core/kernels/gemm_eigen.h
  } else if (use == GemmBackend::Blas) {
    const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    const int lda = static_cast<int>(ac), ldb = static_cast<int>(bc);
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, n);
    else
      cblas_dgemm(CblasRowMajor, TA, TB, m, n, k, 1.0, A, lda, B, ldb, accumulate ? 1.0 : 0.0, C, n);
  }
}

}  // namespace

void gemm(bool ta, bool tb, const Tensor& a, const Tensor& b, Tensor& c, bool accumulate) {
  const std::int64_t ar = a.shape()[0], ac = a.shape()[1], br = b.shape()[0], bc = b.shape()[1];
  const std::int64_t M = ta ? ac : ar, K = ta ? ar : ac, N = tb ? br : bc;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) c.zero_();
    return;
  }
  GemmBackend use = forced != GemmBackend::Auto ? forced : chosen_gemm_backend(a.dtype(), M, N, K, ta, tb);
  if (a.dtype() == Dtype::Float32)
    run_gemm<float>(use, ta, tb, a, b, c, M, N, K, accumulate);
  else
    run_gemm<double>(use, ta, tb, a, b, c, M, N, K, accumulate);
}

const char* gemm_backend_name(GemmBackend b) {
  switch (b) {
    case GemmBackend::Auto: return "auto";
    case GemmBackend::Xsmm: return "libxsmm";
    case GemmBackend::Eigen: return "eigen";
    case GemmBackend::Blas: return "openblas";
  }
  return "?";
}

// Measured 1 thread, process CPU time, libxsmm against Eigen (GFLOP/s, AVX-512 / AVX2 build):
// NT pays for the transposed panel: float32 32x128x50 112 vs 95 / 73 vs 67, but K = 128
// (32x50x128) 83 vs 91 / 41 vs 61, float64 32x128x50 37 vs 43 / 20 vs 30; NN and TN win
// everywhere (float32 32x128x50 167 vs 110 / 86 vs 69, float64 79 vs 52 / 34 vs 26) except
// float32 with AVX2 at a column count off the 8-float vector (N = 50: 48 vs 62).
GemmBackend chosen_gemm_backend(Dtype dtype, std::int64_t M, std::int64_t N, std::int64_t K, bool ta, bool tb) {
  (void)ta;
  if (M * N * K > kGemmSmallMaxFlops) return blas_is_fallback() ? GemmBackend::Eigen : GemmBackend::Blas;
  if (N < kXsmmMinN || !xsmm_available()) return GemmBackend::Eigen;
  const std::int64_t bytes = dtype == Dtype::Float64 ? 8 : 4;
  if (tb && K * bytes > kXsmmMaxTransposedKBytes) return GemmBackend::Eigen;  // the (K, N) panel costs more than it wins
  if (N % xsmm_column_multiple(dtype) != 0) return GemmBackend::Eigen;
  return GemmBackend::Xsmm;
}

std::int64_t xsmm_column_multiple(Dtype dtype) {
  // libxsmm generates code for the kernels' level (gemm_xsmm.cpp caps it at isa())
  if (isa() == Isa::Avx512) return 1;
  return dtype == Dtype::Float32 ? 8 : 1;
}

const char* blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

bool blas_is_fallback() {
  static const bool fallback = compute_blas_is_fallback();
  return fallback;
}

void force_gemm_backend(GemmBackend b) { forced = b; }
GemmBackend forced_gemm_backend() { return forced; }

}  // namespace detail

namespace {
Tensor gemm_new(bool ta, bool tb, const Tensor& a, const Tensor& b) {
  const std::int64_t M = ta ? a.shape()[1] : a.shape()[0];
  const std::int64_t N = tb ? b.shape()[0] : b.shape()[1];
  Tensor c = Tensor::empty({M, N}, a.dtype());
  detail::gemm(ta, tb, a, b, c);
  return c;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  kernels::check_floating_pair(a, b, "matmul");
  if (a.dim() != 2 || b.dim() != 2 || a.shape()[1] != b.shape()[0])
    throw std::invalid_argument("matmul: expected (M, K) @ (K, N), got " + shape_str(a.shape()) + " @ " +
                                shape_str(b.shape()));
  Tensor out = gemm_new(false, false, a, b);
  if (autograd::needs_grad({&a, &b})) {
    // dA = dC·Bᵀ, dB = Aᵀ·dC
    autograd::record("matmul", out, {a, b}, [a, b](const Tensor& g, GradSink& gs) {
      if (autograd::creating_graph()) {  // the same products, recorded
        if (gs.needs(0)) gs.add(0, matmul(g, transpose(b, 0, 1)));
        if (gs.needs(1)) gs.add(1, matmul(transpose(a, 0, 1), g));
        return;
      }
      if (gs.needs(0)) gs.add(0, gemm_new(false, true, g, b));
      if (gs.needs(1)) gs.add(1, gemm_new(true, false, a, g));
    }, autograd::kSavesInputs | autograd::kSecondOrder);
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  kernels::check_floating(x, "linear");
  kernels::check_floating(weight, "linear");
  kernels::check_same_dtype(x, weight, "linear");
  if (weight.dim() != 2)
    throw std::invalid_argument("linear: weight must be (out_features, in_features), got " + shape_str(weight.shape()));
  const std::int64_t out_f = weight.shape()[0], in_f = weight.shape()[1];
  if (x.dim() < 1 || x.shape().back() != in_f)
    throw std::invalid_argument("linear: expected input (*, " + std::to_string(in_f) + "), got " +
                                shape_str(x.shape()) + " (weight " + shape_str(weight.shape()) + ")");
  if (bias.defined()) {
    kernels::check_same_dtype(x, bias, "linear");
    if (bias.dim() != 1 || bias.shape()[0] != out_f)  // compared without building a Shape
      throw std::invalid_argument("linear: expected bias (" + std::to_string(out_f) + "), got " +
                                  shape_str(bias.shape()));
  }
  std::int64_t rows = 1;  // product of the leading sizes (not numel / in_f: in_f may be 0)
  for (std::int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.shape()[static_cast<std::size_t>(d)];
  const bool flat = x.dim() == 2;  // (N, in): no reshaping views needed
  Tensor x2 = flat ? x : alias_with_shape(x, {rows, in_f});
  Tensor y2 = Tensor::empty({rows, out_f}, x.dtype());
  if (bias.defined()) {
    TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "linear", [&] {
      kernels::pointwise<scalar_t>().fill_rows(y2.data<scalar_t>(), bias.data<scalar_t>(), rows, out_f);  // per ISA level
    });
  }
  detail::gemm(false, true, x2, weight, y2, bias.defined());
  Tensor out = y2;
  if (!flat) {
    Shape os = x.shape();
    os.back() = out_f;
    out = alias_with_shape(y2, os);
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    // x2 and weight are (views of) this node's inputs: holding them makes no cycle
    autograd::record("linear", out, {x, weight, bias},
                     [x, x2, w = weight, rows, out_f, flat](const Tensor& g, GradSink& gs) {
                       if (autograd::creating_graph()) {  // the same products, recorded
                         const Tensor g2 = flat ? g : reshape(g, {rows, out_f});
                         if (gs.needs(0)) gs.add(0, reshape(matmul(g2, w), gs.input_shape(0)));
                         if (gs.needs(1))
                           gs.add(1, matmul(transpose(g2, 0, 1), flat ? x : reshape(x, {rows, w.shape()[1]})));
                         if (gs.needs(2)) gs.add(2, sum(g2, {0}));
                         return;
                       }
                       const Tensor g2 = flat ? g : alias_with_shape(g, {rows, out_f});
                       if (gs.needs(0)) {  // dy·W
                         Tensor gx = gemm_new(false, false, g2, w);
                         gs.add(0, flat ? gx : alias_with_shape(gx, gs.input_shape(0)));
                       }
                       if (gs.needs(1)) gs.add(1, gemm_new(true, false, g2, x2));  // dyᵀ·x
                       if (gs.needs(2)) gs.add(2, detail::sum_rows_values(g2));    // Σ dy
                     }, autograd::kSavesInputs | autograd::kSecondOrder);
  }
  return out;
}

}  // namespace tapegrad
