#pragma once
// Internal: the (N, C) kernels of batch norm (x viewed as N rows of C channels, S = 1),
// the shape of BatchNorm1d on (N, C) and the case that dominates MLP training.
// functional::batch_norm calls them (bn_rows_forward<T>().moments(...), ...);
// the (N, C, S) case with S > 1 has its own kernels (batch_norm_ncs.h).
//
// Layout of the work: rows are split into chunks of about 1 MB that the threads take as
// they finish one (for_row_chunks in simd.h); sums keep one partial per chunk, merged in chunk
// order, so results are the same bits on 1 or 2 threads and do not depend on timing. Operands up to 512 KB (the
// sizes of MLP training) are walked a chunk of channels at a time (up to 64 floats or 32
// doubles, held in registers) down the rows; larger ones row by row, the order the
// hardware prefetcher follows best, with per-channel sums in L1.
//
// Memory passes at (65536, 256): the statistics read x once (each block's second pass runs
// from L1); the normalisation reads x and writes y; the backward sums read x and dy; dx
// reads them again and writes dx. Outputs larger than the cache use streaming stores.
// (Walking the second and fourth passes last row first, to find the tail of the previous
// pass in the last-level cache, was measured slower: descending rows halve the read rate
// here, and the cache keeps only about 16 MB of the tail.)
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels {

/// The activation fused after the normalisation by functional::batch_norm_relu: none, relu
/// (`v <= 0 ? 0 : v`, NaN passes), or relu then clamp at hi (`r > hi ? hi : r`), the core
/// ops' own element-wise selects, so the values are relu's and relu_clamp's.
constexpr int kBnActNone = 0, kBnActRelu = 1, kBnActReluClamp = 2;

/// The forward kernels of batch norm over (N, C) (cpu/batch_norm_nc_forward.cpp, once per level).
template <class T>
struct BnRowsForwardKernels {
  /// Per-channel mean and biased variance σ² = Σ(x - μ)²/N (float64, C values each) of x (N, C).
  /// T-precision sums that stay exact where it matters, merged in double:
  ///   per block, K = the block's first row: s = Σ(x - K) (a constant channel sums exact
  ///   zeros), m = K + s/nb; then from L1 r = Σ(x - m), q = Σ(x - m)², so the block's mean is
  ///   m + r/nb and its M2 = q - r²/nb (the corrected two-pass formula);
  ///   blocks and threads merged with Chan, Golub & LeVeque's (1979) update
  ///   M2 = M2_a + M2_b + δ²·n_a·n_b/n, δ = mean_b - mean_a.
  /// A constant channel gets exactly its value as mean and variance exactly 0. N >= 1.
  void (*moments)(const T* x, std::int64_t N, std::int64_t C, double* mean, double* var);
  /// y[n, c] = (x[n, c] - mu[c])·a[c] + b[c] for x, y (N, C).
  void (*affine)(const T* x, T* y, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b);
  /// affine, then the activation `act`: y = act(v), v = (x - mu)·a + b; `pre` (N, C)
  /// receives v (the backward's mask is read from it) unless act is kBnActNone.
  void (*affine_act)(const T* x, T* y, T* pre, std::int64_t N, std::int64_t C, const T* mu, const T* a, const T* b,
                     int act, T hi);
};
TAPEGRAD_DECLARE_KERNELS(BnRowsForwardKernels, bn_rows_forward)

/// The backward kernels of batch norm over (N, C) (cpu/batch_norm_nc_backward.cpp, once per level).
template <class T>
struct BnRowsBackwardKernels {
  /// s1[c] = Σ_n dy[n, c] and s2[c] = Σ_n dy[n, c]·(x[n, c] - mu[c]) (float64) for x, dy (N, C).
  void (*sums)(const T* x, const T* dy, std::int64_t N, std::int64_t C, const T* mu, double* s1, double* s2);
  /// dx[n, c] = k1[c]·(dy[n, c] - k2[c] - (x[n, c] - mu[c])·k3[c]) for x, dy, dx (N, C).
  void (*dx)(const T* x, const T* dy, T* dx, std::int64_t N, std::int64_t C, const T* mu, const T* k1, const T* k2,
             const T* k3);
  /// sums and dx of dy masked by the activation's backward: dy where relu's
  /// `m <= 0 ? 0 : dy` (kBnActRelu) or relu_clamp's `0 < m <= hi` (kBnActReluClamp) lets it
  /// through, else 0 (m = v, the activation's input); the same values as the mask applied
  /// first, without writing the masked dy.
  void (*sums_masked)(const T* x, const T* dy, const T* m, std::int64_t N, std::int64_t C, const T* mu, double* s1,
                      double* s2, int act, T hi);
  /// dx of dy masked as in sums_masked.
  void (*dx_masked)(const T* x, const T* dy, const T* m, T* dx, std::int64_t N, std::int64_t C, const T* mu,
                    const T* k1, const T* k2, const T* k3, int act, T hi);
};
TAPEGRAD_DECLARE_KERNELS(BnRowsBackwardKernels, bn_rows_backward)

}  // namespace tapegrad::layers::functional::kernels
