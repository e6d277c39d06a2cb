#pragma once
// What every normalisation op returns for an input with no elements (a zero-size batch or
// spatial size), as PyTorch does: an empty output, no statistics taken (running statistics
// stay as they are), and zero gradients for the input, weight and bias.
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::functional::detail {

/// A zero-filled tensor of x's shape (x has no elements), recorded as op `op` with zero
/// gradients for x, weight and bias (each may be undefined).
inline Tensor empty_norm_output(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  Tensor out = Tensor::zeros(x.shape(), x.dtype());
  if (autograd::needs_grad({&x, &weight, &bias}))
    autograd::record(op, out, {x, weight, bias}, [](const Tensor& g, GradSink& gs) {
      for (std::size_t i = 0; i < 3; ++i)
        if (gs.needs(i)) gs.add(i, Tensor::zeros(gs.input_shape(i), g.dtype()));
    });
  return out;
}

}  // namespace tapegrad::layers::functional::detail
