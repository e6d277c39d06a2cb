#pragma once
// Santurkar, Tsipras, Ilyas & Madry 2018 ("How Does Batch Normalization Help Optimization?",
// NeurIPS), Algorithm 1 ("noisy" BatchNorm): time-varying, non-zero-mean, non-unit-variance
// noise injected after a layer, so the next layer's input distribution shifts at every step.
// A study probe, not a PyTorch layer, hence in the study room.
#include <cstdint>
#include <string>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/module.h>

namespace claims {

/// The constants of Algorithm 1 (defaults: the paper's n_m = 0.5, n_v = 1.25, r = 0.1).
struct NoiseOptions {
  double mean_range = 0.5;   ///< n_m: per unit and call, μ_i ~ U(−n_m, n_m)
  double scale_max = 1.25;   ///< n_v: per unit and call, σ_i ~ U(1, n_v)
  double jitter = 0.1;       ///< r: per sample, m_ij ~ N(μ_i, r²), s_ij ~ N(σ_i, r²) (r read as a std)
};
/// Throws std::invalid_argument naming the constant: n_m < 0, n_v < 1, r < 0, or not finite.
void check_noise_options(const NoiseOptions& o);

/// Train mode, input (N, C): per unit i draws μ_i, σ_i once per call (one training step),
/// then per sample j m_ij ~ N(μ_i, r²) and s_ij ~ N(σ_i, r²), and returns y_ij = s_ij·x_ij + m_ij.
/// The noise is a constant for autograd: ∂y/∂x = s. Eval mode: the identity (the input
/// tensor itself). Draws come from the module's own Generator(seed), in the order
/// μ (C), σ (C), then m (N×C, row-major), then s (N×C), the normals by Marsaglia's polar
/// method, so runs are reproducible.
/// No parameters or buffers. Throws std::invalid_argument for input that is not 2-D.
class DistributionNoise : public tapegrad::layers::Module {
 public:
  explicit DistributionNoise(NoiseOptions o = {}, std::uint64_t seed = 0);
  tapegrad::Tensor forward(const tapegrad::Tensor& x) override;
  std::string type_name() const override { return "DistributionNoise"; }
  std::string extra_repr() const override;

  NoiseOptions options;

 private:
  tapegrad::Generator gen_;
};

}  // namespace claims
