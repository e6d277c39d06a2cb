#pragma once
// Finite-difference check of analytic gradients (float64, central differences).
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad {

/// Tolerances of gradcheck (PyTorch's torch.autograd.gradcheck defaults).
struct GradcheckOptions {
  double eps = 1e-6;   ///< finite-difference step
  double atol = 1e-6;  ///< |analytic - numeric| <= atol + rtol·|numeric|
  double rtol = 1e-4;  ///< relative tolerance (see atol)
};

/// What gradcheck found.
struct GradcheckResult {
  bool ok = true;           ///< every compared entry within tolerance
  double max_abs_error = 0;  ///< over every compared Jacobian-vector product entry
  std::string message;       ///< first failure, naming input and element
};

/// Compares the analytic Jacobian of fn (via backward) with central differences, for
/// every element of every float64 input that requires grad. Outputs with up to 32
/// elements are checked row by row (the full Jacobian); larger ones through 4 random
/// projections. Inputs must be float64 leaves; throws std::invalid_argument otherwise.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

/// Second-order check (torch.autograd.gradgradcheck): gradcheck of the first-order
/// vector-Jacobian product (x, u) ↦ d(Σ fn(x)·u)/dx, computed with create_graph, against
/// central differences, where u is a fixed random grad_output (float64, normal(0, 1),
/// seed 12345) that itself requires grad. Checks every float64 input that requires grad,
/// and u. Inputs must be float64 leaves; throws std::invalid_argument otherwise (as
/// gradcheck). An op whose backward is not differentiable fails here (or throws naming it).
GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

}  // namespace tapegrad
