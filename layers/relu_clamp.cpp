#include <tapegrad/layers/relu_clamp.h>

#include <stdexcept>

#include <tapegrad/core/ops/activation.h>
#include <tapegrad/layers/clamp.h>

namespace tapegrad::layers {

ReLUClamp::ReLUClamp(double lo, double hi) : lo(lo), hi(hi) {
  if (!(lo <= 0 && hi >= 0))  // also refuses NaN
    throw std::invalid_argument("ReLUClamp: expected lo <= 0 <= hi, got lo=" + std::to_string(lo) +
                                ", hi=" + std::to_string(hi));
}

Tensor ReLUClamp::forward(const Tensor& x) { return relu_clamp(x, lo, hi); }

std::string ReLUClamp::extra_repr() const { return clamp_bounds_repr(lo, hi); }

}  // namespace tapegrad::layers
