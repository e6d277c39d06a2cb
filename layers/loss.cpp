#include "layers/loss.h"

#include <stdexcept>

#include "core/ops.h"

namespace tapegrad::layers {

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (!input.defined() || !target.defined()) throw std::invalid_argument("mse_loss: undefined input or target");
  if (input.shape() != target.shape())
    throw std::invalid_argument("mse_loss: input shape " + shape_str(input.shape()) + " and target shape " +
                                shape_str(target.shape()) + " differ");
  Tensor sq = square(sub(input, target));
  switch (reduction) {
    case Reduction::None: return sq;
    case Reduction::Sum: return sum(sq);
    case Reduction::Mean: break;
  }
  if (input.numel() == 0) throw std::invalid_argument("mse_loss: mean over an empty input");
  return mean(sq);
}

}  // namespace tapegrad::layers
