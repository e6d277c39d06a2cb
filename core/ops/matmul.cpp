// Matrix products: forward and backward side by side.
#include "core/ops/matmul.h"

#include <cblas.h>

#include <Eigen/Core>

#include "core/autograd.h"
#include "core/ops/kernels.h"
#include "core/ops/reduce.h"
#include "core/ops/shape_ops.h"
#include "core/ops/small_gemm.h"

namespace tapegrad {
namespace detail {
namespace {

// Below this many multiply-adds Eigen's kernel beats OpenBLAS 0.3.21 on one thread
// (measured with AVX-512 on a 2-core EPYC: 32x50x128 128 vs 91 GFLOP/s, 200x128x64 136
// vs 90, 100x300x100 125 vs 93); above it Eigen's blocking has slow cases (256^3: 25 vs
// 94) and OpenBLAS also spreads the work over the threads. On AVX-512, float32 products
// below it with at least 32 columns take small_sgemm (no packing), faster still.
constexpr std::int64_t kEigenMaxFlops = std::int64_t(1) << 22;

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
void eigen_gemm(bool ta, bool tb, const T* A, const T* B, T* C, std::int64_t M, std::int64_t N, std::int64_t K,
                std::int64_t ar, std::int64_t ac, std::int64_t br, std::int64_t bc, bool acc) {
  Eigen::Map<const RowMat<T>> a(A, ar, ac);
  Eigen::Map<const RowMat<T>> b(B, br, bc);
  Eigen::Map<RowMat<T>> c(C, M, N);
  (void)K;
  if (!acc) c.setZero();
  if (!ta && !tb) c.noalias() += a * b;
  else if (!ta && tb) c.noalias() += a * b.transpose();
  else if (ta && !tb) c.noalias() += a.transpose() * b;
  else c.noalias() += a.transpose() * b.transpose();
}

}  // namespace

void gemm(bool ta, bool tb, const Tensor& a, const Tensor& b, Tensor& c, bool accumulate) {
  // Eigen only ever sees products below the BLAS crossover: a parallel region would cost
  // more than such a product, so Eigen runs on the calling thread.
  static const bool eigen_serial = (Eigen::setNbThreads(1), true);
  (void)eigen_serial;
  const std::int64_t ar = a.shape()[0], ac = a.shape()[1], br = b.shape()[0], bc = b.shape()[1];
  const std::int64_t M = ta ? ac : ar, K = ta ? ar : ac, N = tb ? br : bc;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) c.zero_();
    return;
  }
  const bool small = M * N * K <= kEigenMaxFlops;
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if (a.dtype() == Dtype::Float32) {
    if (small && small_sgemm_suits(M, N, K))
      small_sgemm(ta, tb, a.data<float>(), b.data<float>(), c.data<float>(), M, N, K, accumulate);
    else if (small)
      eigen_gemm<float>(ta, tb, a.data<float>(), b.data<float>(), c.data<float>(), M, N, K, ar, ac, br, bc, accumulate);
    else
      cblas_sgemm(CblasRowMajor, TA, TB, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f,
                  a.data<float>(), static_cast<int>(ac), b.data<float>(), static_cast<int>(bc), accumulate ? 1.0f : 0.0f,
                  c.data<float>(), static_cast<int>(N));
  } else {
    if (small)
      eigen_gemm<double>(ta, tb, a.data<double>(), b.data<double>(), c.data<double>(), M, N, K, ar, ac, br, bc,
                         accumulate);
    else
      cblas_dgemm(CblasRowMajor, TA, TB, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0,
                  a.data<double>(), static_cast<int>(ac), b.data<double>(), static_cast<int>(bc), accumulate ? 1.0 : 0.0,
                  c.data<double>(), static_cast<int>(N));
  }
}

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
  kernels::check_floating(a, "matmul");
  kernels::check_floating(b, "matmul");
  kernels::check_same_dtype(a, b, "matmul");
  if (a.dim() != 2 || b.dim() != 2 || a.shape()[1] != b.shape()[0])
    throw std::invalid_argument("matmul: expected (M, K) @ (K, N), got " + shape_str(a.shape()) + " @ " +
                                shape_str(b.shape()));
  Tensor out = gemm_new(false, false, a, b);
  if (autograd::needs_grad({&a, &b})) {
    // dA = dC·Bᵀ, dB = Aᵀ·dC
    autograd::record("matmul", out, {a, b}, [a = a.detach(), b = b.detach()](const Tensor& g, GradSink& gs) {
      if (gs.needs(0)) gs.add(0, gemm_new(false, true, g, b));
      if (gs.needs(1)) gs.add(1, gemm_new(true, false, a, g));
    });
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
    if (bias.shape() != Shape{out_f})
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
      const scalar_t* b = bias.data<scalar_t>();
      scalar_t* y = y2.data<scalar_t>();
      for (std::int64_t r = 0; r < rows; ++r) std::copy(b, b + out_f, y + r * out_f);
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
                     [x2, w = weight, rows, out_f, flat](const Tensor& g, GradSink& gs) {
                       const Tensor g2 = flat ? g : alias_with_shape(g, {rows, out_f});
                       if (gs.needs(0)) {  // dy·W
                         Tensor gx = gemm_new(false, false, g2, w);
                         gs.add(0, flat ? gx : alias_with_shape(gx, gs.input_shape(0)));
                       }
                       if (gs.needs(1)) gs.add(1, gemm_new(true, false, g2, x2));  // dyᵀ·x
                       if (gs.needs(2)) gs.add(2, detail::sum_rows_values(g2));    // Σ dy
                     });
  }
  return out;
}

}  // namespace tapegrad
