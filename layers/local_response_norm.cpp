#include <tapegrad/layers/local_response_norm.h>

#include <sstream>
#include <stdexcept>

namespace tapegrad::layers {

LocalResponseNorm::LocalResponseNorm(std::int64_t s, double a, double b, double kk) : size(s), alpha(a), beta(b), k(kk) {
  if (s < 1) throw std::invalid_argument("LocalResponseNorm: size must be >= 1, got " + std::to_string(s));
}

Tensor LocalResponseNorm::forward(const Tensor& x) {
  return functional::local_response_norm(x, size, alpha, beta, k);
}

std::string LocalResponseNorm::extra_repr() const {
  std::ostringstream os;
  os << size << ", alpha=" << alpha << ", beta=" << beta << ", k=" << k;
  return os.str();
}

}  // namespace tapegrad::layers
