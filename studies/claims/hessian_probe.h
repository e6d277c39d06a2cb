#pragma once
// The Hessian of a training loss seen through autograd::HessianOperator as a flat symmetric
// operator (spectrum.h), and one probe of its spectrum as Ghorbani, Krishnan & Xiao (2019)
// measure it: λ_max and the top-k eigenvalues by Lanczos, the SLQ density, the bulk edge, the
// outliers beyond it and the share of the gradient's energy in the top-k eigenspace.
#include <cstdint>
#include <vector>

#include "spectrum.h"
#include <tapegrad/core/autograd.h>

namespace claims {

/// The entries of `ts`, tensor after tensor (row-major), as float64.
std::vector<double> flatten(const std::vector<tapegrad::Tensor>& ts);
/// `flat` cut into tensors of the shapes and dtypes of `like`. Throws std::invalid_argument
/// when flat.size() is not the total element count of `like` (naming both).
std::vector<tapegrad::Tensor> unflatten(const std::vector<double>& flat, const std::vector<tapegrad::Tensor>& like);
/// Total element count of `ts`.
std::int64_t total_numel(const std::vector<tapegrad::Tensor>& ts);

/// H as a SymmetricOperator over the flattened parameters (H.params() order). Refers to `h`,
/// which must outlive it.
SymmetricOperator flat_operator(const tapegrad::autograd::HessianOperator& h);

struct SpectrumOptions {
  int top_k = 10;           ///< eigenvalues by Lanczos (λ_1 ≥ … ≥ λ_k) and the eigenspace for the gradient share
  int lanczos_steps = 0;    ///< 0: max(3·top_k, 40), at most the parameter count
  SlqOptions slq;           ///< probes, steps, seed of the density
  /// Gaussian width of the density as a fraction of the SLQ spectrum's range (max − min node):
  /// Ghorbani et al. smooth at σ² = 1e-5 of the range normalised to [-1, 1], σ ≈ 0.0016·range.
  double sigma_fraction = 0.01;
  std::uint64_t seed = 0;   ///< the Lanczos start vector
};

struct SpectrumProbe {
  std::vector<double> top;    ///< λ_1 ≥ … ≥ λ_k (Ritz values)
  double lambda_max = 0;      ///< top[0]
  double lambda_min = 0;      ///< the smallest SLQ node (the estimate of the lowest eigenvalue)
  double sigma = 0;           ///< the density's Gaussian width
  double bulk_edge = 0;       ///< bulk_edge(density, sigma)
  int outliers = 0;           ///< top-k eigenvalues above the bulk edge (k if all are: raise top_k)
  /// Σ_{i ≤ k} (u_i·g)² / ‖g‖²: the gradient's energy in the top-k Ritz space (0 for g = 0).
  double gradient_share = 0;
  double gradient_norm = 0;   ///< ‖g‖
  SpectralDensity density;
};

/// Probes the Hessian of `loss` with respect to `params` (each requires grad). Throws as
/// HessianOperator and the spectrum functions do; std::invalid_argument for top_k < 1 or
/// sigma_fraction <= 0.
SpectrumProbe probe_spectrum(const tapegrad::Tensor& loss, const std::vector<tapegrad::Tensor>& params,
                             const SpectrumOptions& options = {});

}  // namespace claims
