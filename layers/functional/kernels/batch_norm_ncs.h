#pragma once
// Internal: the (N, C, S) passes of batch norm with S > 1 (BatchNorm2d/3d; x viewed as N·C
// rows of S values), compiled once per ISA level (cpu/batch_norm_ncs.cpp;
// core/kernels/isa_dispatch.h). functional::batch_norm (batch_norm.cpp) splits the channels or
// rows among the threads and calls these on each share (bn_ncs<T>().moments(...), ...);
// the (N, C) case has its own kernels (batch_norm_nc.h).
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels {

/// The (N, C, S) kernels of batch norm (cpu/batch_norm_ncs.cpp, once per level).
template <class T>
struct BnNcsKernels {
  /// mean[c] and M2[c] = Σ(x - mean)² (float64) of channels [c0, c1) of x (N, C, S), N·S >= 1:
  /// blocks of rows (thresholds::bn_spatial_block_rows) each summed in 8 fixed lanes, then
  /// around the block mean from cache; blocks merged with Chan et al.'s update (moments.h).
  void (*moments)(const T* x, std::int64_t N, std::int64_t C, std::int64_t S, std::int64_t c0, std::int64_t c1,
                  double* mean, double* m2);
  /// s1[c] = Σ dy and s2[c] = Σ dy·(x - mu[c]) (float64, 8 fixed lanes) over (n, s) for the
  /// channels [c0, c1) of x, dy (N, C, S).
  void (*sums)(const T* x, const T* dy, std::int64_t N, std::int64_t C, std::int64_t S, const double* mu,
               std::int64_t c0, std::int64_t c1, double* s1, double* s2);
  /// y = (x - mu[c])·a[c] + b[c] for the rows [r0, r1) of S values (row r is channel r mod C);
  /// with `stream`, through an L1 buffer and streaming stores (then a fence).
  void (*affine)(const T* x, T* y, std::int64_t C, std::int64_t S, std::int64_t r0, std::int64_t r1, const T* mu,
                 const T* a, const T* b, bool stream);
  /// dx = k1[c]·(dy - k2[c] - (x - mu[c])·k3[c]) for the rows [r0, r1), as affine.
  void (*dx)(const T* x, const T* dy, T* dx, std::int64_t C, std::int64_t S, std::int64_t r0, std::int64_t r1,
             const T* mu, const T* k1, const T* k2, const T* k3, bool stream);
};
TAPEGRAD_DECLARE_KERNELS(BnNcsKernels, bn_ncs)

}  // namespace tapegrad::layers::functional::kernels
