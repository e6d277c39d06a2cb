#pragma once
// Internal: the fused per-row kernels of LayerNorm (and GroupNorm on (N, C) inputs): R rows
// of K contiguous values, each row normalised over itself, one affine channel per value
// (the S = 1 case of functional::detail::grouped_norm, which calls these: ln_rows<T>().forward).
//
// A row (1 KB at K = 256 float32) stays in L1 between its passes, so the forward reads x
// once and writes y once, and the backward reads x and dy once and writes dx once: the five
// passes over memory that the data needs (y with plain stores, dx with streaming stores when
// it is larger than the cache: each measured the faster). The per-row sums run in
// T-precision vectors (independent accumulators) and are added up across lanes in double.
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels {

/// The per-row LayerNorm kernels (cpu/layer_norm_rows.cpp, once per level).
template <class T>
struct LnRowsKernels {
  /// Forward. Row r covers affine channels c0 .. c0 + K with c0 = (r mod G)·K; w and b hold
  /// G·K values or are null (γ = 1, β = 0). Per row, with k0 = its first value:
  ///   s = Σ(x - k0), m = k0 + s/K (exact for a constant row);
  ///   r = Σ(x - m), q = Σ(x - m)²: μ = m + r/K, σ² = (q - r²/K)/K (corrected two-pass);
  ///   y = (x - μ)·rstd·γ + β with rstd = 1/sqrt(σ² + eps).
  /// mean[r] receives μ rounded to T (the value the backward subtracts), rstd[r] the rstd,
  /// var[r] (when var is not null) σ².
  void (*forward)(const T* x, T* y, std::int64_t R, std::int64_t K, std::int64_t G, const T* w, const T* b,
                  double eps, double* mean, double* rstd, double* var);
  /// Backward. With x̂ = (x - μ)·rstd and dx̂ = γ·dy, per row:
  ///   dx = rstd·(dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂))   (written to gx unless gx is null)
  /// and per channel, over all rows: dw[c] = Σ dy·x̂ (dγ), db[c] = Σ dy (dβ), in double (G·K
  /// values each, overwritten).
  void (*backward)(const T* dy, const T* x, T* gx, std::int64_t R, std::int64_t K, std::int64_t G, const T* w,
                   const double* mean, const double* rstd, double* dw, double* db);
};
TAPEGRAD_DECLARE_KERNELS(LnRowsKernels, ln_rows)

}  // namespace tapegrad::layers::functional::kernels
