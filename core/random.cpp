#include <tapegrad/core/random.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tapegrad {

double Generator::uniform() {
  // 53 random bits -> [0, 1)
  return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);
}

double Generator::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::int64_t Generator::randint(std::int64_t n) {
  if (n <= 0) throw std::invalid_argument("randint: expected n > 0, got " + std::to_string(n));
  return static_cast<std::int64_t>(engine_() % static_cast<std::uint64_t>(n));
}

std::string Generator::get_state() const {
  std::ostringstream os;
  os << engine_;
  return os.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream is(state);
  std::mt19937_64 e;
  is >> e;
  if (is.fail()) throw std::invalid_argument("Generator::set_state: malformed generator state");
  is >> std::ws;
  if (!is.eof())
    throw std::invalid_argument("Generator::set_state: malformed generator state (text after the engine's " +
                                std::to_string(std::mt19937_64::state_size + 1) + " numbers)");
  // the 312 state words (the 313th number is the position): all zero is the degenerate state
  // that yields only zeros, and normal() would wait forever for a uniform draw above 0
  std::istringstream words(state);
  bool nonzero = false;
  for (std::size_t i = 0; i < std::mt19937_64::state_size && !nonzero; ++i) {
    std::uint64_t w = 0;
    words >> w;
    nonzero = w != 0;
  }
  if (!nonzero)
    throw std::invalid_argument("Generator::set_state: expected a state with a non-zero word, got all " +
                                std::to_string(std::mt19937_64::state_size) + " words 0 (the engine would yield only zeros)");
  engine_ = e;
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

Tensor randn(const Shape& shape, Dtype dtype, Generator& gen) {
  Tensor t = Tensor::empty(shape, dtype);
  const std::int64_t n = t.numel();
  if (dtype == Dtype::Float32) {
    float* p = t.data<float>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(gen.normal());
  } else {
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = gen.normal();
  }
  return t;
}

Tensor uniform(const Shape& shape, double lo, double hi, Dtype dtype, Generator& gen) {
  if (!(hi >= lo)) throw std::invalid_argument("uniform: expected lo <= hi");
  Tensor t = Tensor::empty(shape, dtype);
  const std::int64_t n = t.numel();
  if (dtype == Dtype::Float32) {
    float* p = t.data<float>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(lo + (hi - lo) * gen.uniform());
  } else {
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = lo + (hi - lo) * gen.uniform();
  }
  return t;
}

}  // namespace tapegrad
