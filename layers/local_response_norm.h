#pragma once
// Local response normalisation across channels (Krizhevsky, Sutskever & Hinton 2012,
// "ImageNet Classification with Deep Convolutional Neural Networks", section 3.3),
// with PyTorch's conventions (nn.LocalResponseNorm).
#include <tapegrad/layers/functional/local_response_norm.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// LocalResponseNorm(size, alpha = 1e-4, beta = 0.75, k = 1): normalises each value by
/// the squares of its neighbours across channels (a window of `size` channels), see
/// functional::local_response_norm. No parameters or buffers; same in train and eval.
/// Throws std::invalid_argument for size < 1.
class LocalResponseNorm : public Module {
 public:
  /// Normalisation over `size` neighbouring channels with the given alpha, beta and k
  /// (PyTorch's defaults). Throws std::invalid_argument for size < 1.
  explicit LocalResponseNorm(std::int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LocalResponseNorm"; }
  std::string extra_repr() const override;

  /// Channels in the window.
  std::int64_t size;
  ///@{
  /// The formula's constants: b = a / (k + alpha/size · Σ a²)^beta.
  double alpha, beta, k;
  ///@}
};

}  // namespace tapegrad::layers
