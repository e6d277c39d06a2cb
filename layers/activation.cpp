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

Flatten::Flatten(std::int64_t s, std::int64_t e) : start_dim(s), end_dim(e) {}

Tensor Flatten::forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("Flatten: the input is undefined");
  if (x.dim() == 0) return reshape(x, {1});
  const std::int64_t r = x.dim();
  auto wrap = [&](std::int64_t d, const char* what) {
    const std::int64_t w = d < 0 ? d + r : d;
    if (w < 0 || w >= r)
      throw std::invalid_argument(std::string("Flatten: ") + what + " " + std::to_string(d) +
                                  " is out of range for input of shape " + shape_str(x.shape()));
    return w;
  };
  const std::int64_t s = wrap(start_dim, "start_dim"), e = wrap(end_dim, "end_dim");
  if (s > e)
    throw std::invalid_argument("Flatten: start_dim " + std::to_string(start_dim) + " comes after end_dim " +
                                std::to_string(end_dim) + " for input of shape " + shape_str(x.shape()));
  Shape out;
  for (std::int64_t d = 0; d < s; ++d) out.push_back(x.size(d));
  std::int64_t merged = 1;
  for (std::int64_t d = s; d <= e; ++d) merged *= x.size(d);
  out.push_back(merged);
  for (std::int64_t d = e + 1; d < r; ++d) out.push_back(x.size(d));
  return reshape(x, out);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

}  // namespace tapegrad::layers
