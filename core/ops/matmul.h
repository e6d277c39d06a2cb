#pragma once
// Matrix products: libxsmm's generated kernels for small shapes, OpenBLAS cblas_?gemm for
// large ones, Eigen as the fallback (core/ops/gemm_backends.h says which takes which).
#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// (M, K) @ (K, N) -> (M, N). Throws std::invalid_argument naming both shapes when the
/// inner sizes differ or an operand is not 2-D.
Tensor matmul(const Tensor& a, const Tensor& b);

/// y = x · Wᵀ + b, PyTorch's Linear. x (*, in_features), weight (out_features,
/// in_features), bias (out_features) or undefined -> (*, out_features).
/// Backward: dx = dy·W, dW = dyᵀ·x, db = Σ_rows dy. Throws naming the shapes on mismatch.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

namespace detail {
/// C = op(A)·op(B) (+ C when accumulate); A, B, C contiguous row-major 2-D of one dtype.
void gemm(bool trans_a, bool trans_b, const Tensor& a, const Tensor& b, Tensor& c, bool accumulate = false);
}  // namespace detail

}  // namespace tapegrad
