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
  explicit LocalResponseNorm(std::int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LocalResponseNorm"; }
  std::string extra_repr() const override;

  std::int64_t size;
  double alpha, beta, k;
};

}  // namespace tapegrad::layers
