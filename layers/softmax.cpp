#include <tapegrad/layers/softmax.h>

#include <tapegrad/core/ops/softmax.h>

namespace tapegrad::layers {

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }

Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, dim); }

}  // namespace tapegrad::layers
