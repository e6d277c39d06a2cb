#pragma once
// Stochastic gradient descent with momentum, PyTorch's torch.optim.SGD.
#include <vector>

#include "core/tensor.h"

namespace tapegrad::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// Update (PyTorch): d = g + weight_decay·p; with momentum, buf = d on the first step and
/// buf = momentum·buf + (1 - dampening)·d after; d = d + momentum·buf (nesterov) or buf;
/// p -= lr·d. Parameters without a gradient are skipped. Only parameters are updated:
/// buffers such as running statistics are never seen by an optimizer.
/// Throws std::invalid_argument for lr < 0, momentum < 0, weight_decay < 0, or nesterov
/// without momentum or with dampening.
class SGD {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step();
  /// Clears (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  SGDOptions options;

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> momentum_buffers_;
};

}  // namespace tapegrad::optim
