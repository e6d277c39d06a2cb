#include <tapegrad/layers/dropout.h>

#include <sstream>
#include <stdexcept>

#include <tapegrad/layers/functional/dropout.h>

namespace tapegrad::layers {

Dropout::Dropout(double prob, Generator* generator) : p(prob), gen_(generator) {
  if (!(prob >= 0.0 && prob <= 1.0))
    throw std::invalid_argument("Dropout: expected a probability p in [0, 1], got " + std::to_string(prob));
}

Tensor Dropout::forward(const Tensor& x) {
  return functional::dropout(x, p, is_training(), gen_ ? *gen_ : default_generator());
}

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p << ", inplace=False";
  return os.str();
}

}  // namespace tapegrad::layers
