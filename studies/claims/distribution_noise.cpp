#include "distribution_noise.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/ops/elementwise.h>

namespace claims {

using namespace tapegrad;

void check_noise_options(const NoiseOptions& o) {
  auto bad = [](const char* name, const char* want, double v) {
    std::ostringstream os;
    os << "DistributionNoise: expected " << name << " " << want << ", got " << v;
    throw std::invalid_argument(os.str());
  };
  if (!(std::isfinite(o.mean_range) && o.mean_range >= 0)) bad("--noise-mean (n_m)", ">= 0", o.mean_range);
  if (!(std::isfinite(o.scale_max) && o.scale_max >= 1)) bad("--noise-scale (n_v)", ">= 1", o.scale_max);
  if (!(std::isfinite(o.jitter) && o.jitter >= 0)) bad("--noise-jitter (r)", ">= 0", o.jitter);
}

DistributionNoise::DistributionNoise(NoiseOptions o, std::uint64_t seed) : options(o), gen_(seed) {
  check_noise_options(o);
}

Tensor DistributionNoise::forward(const Tensor& x) {
  if (!is_training()) return x;
  if (x.dim() != 2)
    throw std::invalid_argument("DistributionNoise: expected input (N, C), got " + std::to_string(x.dim()) + " dimensions");
  const std::int64_t n = x.shape()[0], c = x.shape()[1];
  std::vector<double> mu(c), sigma(c), m(n * c), s(n * c);
  for (auto& v : mu) v = -options.mean_range + 2 * options.mean_range * gen_.uniform();
  for (auto& v : sigma) v = 1 + (options.scale_max - 1) * gen_.uniform();
  // m and s: standard normals by Marsaglia's polar method, two per accepted pair (no trig:
  // the deep linear network draws 480,000 per step), then shifted and scaled per unit.
  auto fill = [&](std::vector<double>& out, const std::vector<double>& centre) {
    const std::size_t total = out.size();
    for (std::size_t k = 0; k < total;) {
      double u, v, q;
      do {
        u = 2 * gen_.uniform() - 1;
        v = 2 * gen_.uniform() - 1;
        q = u * u + v * v;
      } while (q >= 1 || q == 0);
      const double f = std::sqrt(-2 * std::log(q) / q);
      out[k] = centre[k % c] + options.jitter * u * f;
      if (++k < total) out[k] = centre[k % c] + options.jitter * v * f, ++k;
    }
  };
  fill(m, mu);
  fill(s, sigma);
  const Tensor S = Tensor::from_vector(s, {n, c}, x.dtype()), M = Tensor::from_vector(m, {n, c}, x.dtype());
  return x * S + M;
}

std::string DistributionNoise::extra_repr() const {
  std::ostringstream os;
  os << "mean_range=" << options.mean_range << ", scale_max=" << options.scale_max << ", jitter=" << options.jitter;
  return os.str();
}

}  // namespace claims
