#pragma once
// Activation ops (element-wise, any shape, float32/float64). Each records a tape node
// when its input requires grad; the backward sits right below the forward in
// activation.cpp.
#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// σ(x) = 1 / (1 + e^(-x)), evaluated without overflow for large |x|.
/// d/dx = σ(x)·(1 - σ(x)) (computed from the output).
Tensor sigmoid(const Tensor& x);
/// tanh(x); d/dx = 1 - tanh²(x) (computed from the output).
Tensor tanh(const Tensor& x);
/// x for x > 0, slope·x otherwise (PyTorch's negative_slope, default 0.01).
/// d/dx = 1 for x > 0, slope for x <= 0 (PyTorch's convention at 0).
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// GELU (Hendrycks & Gimpel 2016). Default, the exact erf form:
///   x·Φ(x) = ½·x·(1 + erf(x/√2)),  d/dx = Φ(x) + x·φ(x),  φ(x) = e^(-x²/2)/√(2π).
/// tanh_approximation = true is PyTorch's approximate='tanh':
///   ½·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³),
///   d/dx = ½·(1 + tanh u) + ½·x·(1 - tanh² u)·√(2/π)·(1 + 3·0.044715·x²).
Tensor gelu(const Tensor& x, bool tanh_approximation = false);

/// clamp(relu(x), lo, hi) as one op and one tape node, for lo <= 0 <= hi (the MLP's ReLU
/// followed by an activation clip; layers::Sequential runs the two layers through it).
/// Bit for bit the composition, gradients included: y = x <= 0 ? 0 : min(x, hi) (NaN passes
/// through), d/dx = 1 for 0 < x <= hi (the clamp's bounds are inclusive, as in clamp), else 0
/// (NaN: 0). lo only has to be <= 0: the ReLU's output never falls below it. Throws
/// std::invalid_argument for a non-float x, lo > 0, hi < 0 or a NaN bound.
Tensor relu_clamp(const Tensor& x, double lo, double hi);

}  // namespace tapegrad
