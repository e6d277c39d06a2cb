#include <tapegrad/layers/activation.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/ops.h>

namespace tapegrad::layers {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Tensor Tanh::forward(const Tensor& x) { return tapegrad::tanh(x); }

LeakyReLU::LeakyReLU(double slope) : negative_slope(slope) {
  if (!std::isfinite(slope))
    throw std::invalid_argument("LeakyReLU: expected a finite negative_slope, got " + std::to_string(slope));
}
Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope); }
std::string LeakyReLU::extra_repr() const {
  std::ostringstream os;
  os << "negative_slope=" << negative_slope;
  return os.str();
}

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  if (approximate != "none" && approximate != "tanh")
    throw std::invalid_argument("GELU: approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate == "tanh"); }
std::string GELU::extra_repr() const { return approximate == "none" ? "" : "approximate='" + approximate + "'"; }

}  // namespace tapegrad::layers
