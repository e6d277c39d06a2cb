#include "layers/activation.h"

#include "core/ops.h"

namespace tapegrad::layers {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

}  // namespace tapegrad::layers
