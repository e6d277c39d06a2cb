#include <tapegrad/layers/init.h>

#include <cmath>
#include <stdexcept>

#include <tapegrad/core/autograd.h>

namespace tapegrad::layers::init {

void uniform_(Tensor& t, double lo, double hi, Generator& gen) {
  NoGradGuard ng;
  t.copy_(uniform(t.shape(), lo, hi, t.dtype(), gen));
}

void kaiming_uniform_(Tensor& t, double a, Generator& gen) {
  if (t.dim() < 2) throw std::invalid_argument("kaiming_uniform_: expected a tensor of rank >= 2");
  std::int64_t fan_in = 1;
  for (std::int64_t d = 1; d < t.dim(); ++d) fan_in *= t.size(d);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = fan_in > 0 ? gain * std::sqrt(3.0 / static_cast<double>(fan_in)) : 0.0;
  uniform_(t, -bound, bound, gen);
}

}  // namespace tapegrad::layers::init
