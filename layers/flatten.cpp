#include "layers/flatten.h"

#include "core/ops/view_ops.h"

namespace tapegrad::layers {

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

}  // namespace tapegrad::layers
