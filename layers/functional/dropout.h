#pragma once
// Functional inverted dropout (Srivastava et al. 2014, "Dropout: A Simple Way to
// Prevent Neural Networks from Overfitting"; the inverted scaling as in PyTorch's
// F.dropout).
#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional {

/// training = true: each element is kept with probability 1 - p and scaled by 1/(1 - p),
/// or zeroed, with a fresh mask drawn from `gen` on every call (one uniform draw per
/// element, row-major). The backward multiplies by the same mask (0 or 1/(1 - p)).
///   p = 0: returns x itself (no draws); p = 1: zeros (output and gradient), no draws.
/// training = false: returns x itself (identity, the gradient passes unchanged).
/// Any shape. Throws std::invalid_argument when p is outside [0, 1] or x is not float.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator& gen = default_generator());

}  // namespace tapegrad::layers::functional
