#pragma once
// Element-wise ops with NumPy/PyTorch broadcasting. Binary ops require equal dtypes
// and broadcastable shapes; errors name both. Each records a tape node when an input
// requires grad.
#include <tapegrad/core/tensor.h>

namespace tapegrad {

Tensor add(const Tensor& a, const Tensor& b);  ///< a + b
Tensor sub(const Tensor& a, const Tensor& b);  ///< a - b
Tensor mul(const Tensor& a, const Tensor& b);  ///< a * b
Tensor div(const Tensor& a, const Tensor& b);  ///< a / b
Tensor add(const Tensor& a, double s);         ///< a + s
Tensor mul(const Tensor& a, double s);         ///< a * s
Tensor neg(const Tensor& a);                   ///< -a
Tensor square(const Tensor& a);                ///< a², d/da = 2a
/// a^p for a real exponent p; d/da = p·a^(p-1).
Tensor pow(const Tensor& a, double p);
/// max(a, 0); the derivative at 0 is 0 (PyTorch's convention).
Tensor relu(const Tensor& a);

///@{
/// Operator spellings of the ops above: a + b is add(a, b), a - b sub, a * b mul, a / b
/// div, -a neg; with a double s: a + s, a - s (add(a, -s)), a * s and s * a (mul), a / s
/// (mul(a, 1/s)). Same broadcasting, dtype rules and errors as the named ops.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return mul(a, 1.0 / s); }
///@}

}  // namespace tapegrad
