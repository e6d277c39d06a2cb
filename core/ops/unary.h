#pragma once
// Element-wise math on float32/float64 tensors (same shape out). int64 inputs throw
// std::invalid_argument naming the op and the dtype. Each records a tape node when the
// input requires grad; derivatives follow PyTorch 1.13 (derivatives.yaml).
#include <optional>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// eˣ; d/dx = eˣ (the saved output is reused).
Tensor exp(const Tensor& x);
/// Natural log; log(0) = -inf, log(x<0) = NaN (as in PyTorch). d/dx = 1/x.
Tensor log(const Tensor& x);
/// √x; sqrt(x<0) = NaN. d/dx = 1/(2√x) (inf at 0, like PyTorch).
Tensor sqrt(const Tensor& x);
/// 1/√x; d/dx = -½·x^(-3/2).
Tensor rsqrt(const Tensor& x);
/// The error function erf(x) = (2/√π)∫₀ˣ e^(-t²) dt; d/dx = (2/√π)·e^(-x²).
Tensor erf(const Tensor& x);
/// |x|; d/dx = sign(x), with sign(0) = 0 (PyTorch's subgradient).
Tensor abs(const Tensor& x);
/// min(max(x, min), max) with either bound optional (at least one must be given, else
/// std::invalid_argument). When min > max every element becomes max (PyTorch's rule).
/// NaN stays NaN. d/dx = 1 where min <= x <= max (bounds inclusive), else 0.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
/// clamp(x, min, none).
inline Tensor clamp_min(const Tensor& x, double min) { return clamp(x, min, std::nullopt); }
/// clamp(x, none, max).
inline Tensor clamp_max(const Tensor& x, double max) { return clamp(x, std::nullopt, max); }

}  // namespace tapegrad
