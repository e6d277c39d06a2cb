#pragma once
// Per-channel moments merged from partial results (the statistics of the batch-norm
// kernels): Chan, Golub & LeVeque (1979), "Updating Formulae and a Pairwise Algorithm for
// Computing Sample Variances": for shares a and b with n = n_a + n_b values,
//   mean = mean_a + δ·n_b/n,  M2 = M2_a + M2_b + δ²·n_a·n_b/n,  δ = mean_b - mean_a.
#include <algorithm>
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels {
inline namespace TAPEGRAD_ISA_INLINE_NS {  // core/kernels/isa_dispatch.h

/// Per-channel count, mean and M2 = Σ(x - mean)² of the values merged so far (C channels,
/// arrays owned by the caller). count = 0: nothing merged yet.
struct PartialMoments {
  std::int64_t count = 0;
  double* mean = nullptr;  // (C)
  double* m2 = nullptr;    // (C)
};

/// Merges a share of nb values per channel, with per-channel mean bmean and M2 bm2, into p
/// (channels [0, C)). The weights are the same for every channel, so the loop vectorises.
inline void merge_moments(PartialMoments& p, std::int64_t C, std::int64_t nb, const double* __restrict bmean,
                          const double* __restrict bm2) {
  double* __restrict mean = p.mean;
  double* __restrict m2 = p.m2;
  if (p.count == 0) {
    std::copy(bmean, bmean + C, mean);
    std::copy(bm2, bm2 + C, m2);
  } else {
    const double na = static_cast<double>(p.count), n = na + static_cast<double>(nb);
    const double f = static_cast<double>(nb) / n, w = na * static_cast<double>(nb) / n;
    for (std::int64_t c = 0; c < C; ++c) {
      const double delta = bmean[c] - mean[c];
      mean[c] += delta * f;
      m2[c] += bm2[c] + delta * delta * w;
    }
  }
  p.count += nb;
}

}  // namespace TAPEGRAD_ISA_INLINE_NS
}  // namespace tapegrad::layers::functional::kernels
