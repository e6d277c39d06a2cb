#include <tapegrad/layers/clamp.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/ops/unary.h>

namespace tapegrad::layers {

Clamp::Clamp(double lo_, double hi_) : lo(lo_), hi(hi_) {
  if (std::isnan(lo) || std::isnan(hi) || lo > hi) {
    std::ostringstream os;
    os << "Clamp: expected lo <= hi, got lo=" << lo << ", hi=" << hi;
    throw std::invalid_argument(os.str());
  }
}

Tensor Clamp::forward(const Tensor& x) { return clamp(x, lo, hi); }

std::string Clamp::extra_repr() const { return clamp_bounds_repr(lo, hi); }

std::string clamp_bounds_repr(double lo, double hi) {
  std::ostringstream os;
  os << "min=" << lo << ", max=" << hi;
  return os.str();
}

}  // namespace tapegrad::layers
