#pragma once
// Element-wise comparisons, PyTorch's torch.eq / ne / lt / le / gt / ge.
//
// Result: 1 where the comparison holds, 0 elsewhere, as a number tensor (tapegrad has no
// Bool dtype), so it can be summed or averaged directly: the inputs' dtype when they are
// float32 or float64, Float32 (the default float dtype) when they are int64. Float32
// counts are exact up to 2^24 ones per sum.
//   accuracy = mean(eq(argmax(logits, 1), y)).item();   // y int64 class indices
//
// Tensor-tensor forms broadcast (NumPy/PyTorch rules) and need equal dtypes; errors name
// both shapes or dtypes. Tensor-scalar forms compare every element with `s`: a float
// tensor compares in its own dtype (s rounded to it, as PyTorch does), an int64 tensor
// compares exactly as double (e.g. lt(int64 0, 0.5) is 1).
// IEEE semantics: every comparison with NaN is false, except ne, which is true.
// Not differentiable: the output never requires grad and records no tape node, whatever
// the inputs' requires_grad (no gradient flows through a step function).
// Throws std::invalid_argument for an undefined input.
#include <tapegrad/core/tensor.h>

namespace tapegrad {

Tensor eq(const Tensor& a, const Tensor& b);  ///< a == b
Tensor ne(const Tensor& a, const Tensor& b);  ///< a != b (true where either is NaN)
Tensor lt(const Tensor& a, const Tensor& b);  ///< a < b
Tensor le(const Tensor& a, const Tensor& b);  ///< a <= b
Tensor gt(const Tensor& a, const Tensor& b);  ///< a > b
Tensor ge(const Tensor& a, const Tensor& b);  ///< a >= b

Tensor eq(const Tensor& a, double s);  ///< a == s
Tensor ne(const Tensor& a, double s);  ///< a != s
Tensor lt(const Tensor& a, double s);  ///< a < s
Tensor le(const Tensor& a, double s);  ///< a <= s
Tensor gt(const Tensor& a, double s);  ///< a > s
Tensor ge(const Tensor& a, double s);  ///< a >= s

}  // namespace tapegrad
