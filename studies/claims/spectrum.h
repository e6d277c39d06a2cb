#pragma once
// The spectrum of a symmetric operator known only through v ↦ Av (a Hessian through
// Hessian-vector products): its top eigenpairs by Lanczos with full reorthogonalisation, and
// its spectral density by stochastic Lanczos quadrature (SLQ; Ubaru, Chen & Saad 2017,
// "Fast estimation of tr(f(A)) via stochastic Lanczos quadrature"; Ghorbani, Krishnan & Xiao
// 2019, "An investigation into neural net optimization via Hessian eigenvalue density", §2).
// Everything is float64 on flat vectors of n entries; probes are Rademacher vectors drawn from
// std::mt19937_64's raw bits, so a seed gives the same numbers on every platform.
#include <cstdint>
#include <functional>
#include <vector>

namespace claims {

/// A symmetric linear operator of dimension n: apply(v) returns A·v (n entries, v has n).
using SymmetricOperator = std::function<std::vector<double>(const std::vector<double>&)>;

/// An m-step Lanczos run: T = tridiag(beta, alpha, beta), Q^T A Q = T with Q's columns
/// orthonormal (each new vector reorthogonalised twice against all earlier ones).
struct LanczosRun {
  std::vector<double> alpha;               ///< T's diagonal, m entries
  std::vector<double> beta;                ///< T's off-diagonal, m − 1 entries
  std::vector<std::vector<double>> basis;  ///< q_1 … q_m (n entries each); empty unless kept
  double last_beta = 0;  ///< ‖r_m‖, the residual after the last step (0: invariant subspace)
};

/// Runs up to `steps` Lanczos steps of `apply` (dimension n) from `start` (any nonzero vector of
/// n entries; it is normalised). Stops early, with fewer steps, when the Krylov space becomes
/// invariant (‖r‖ ≤ 1e-12·‖A q‖). keep_basis keeps q_1 … q_m (needed for Ritz vectors; full
/// reorthogonalisation needs them anyway, so this only decides whether they are returned).
/// Throws std::invalid_argument for n < 1, steps < 1, a start of the wrong size or zero, or an
/// apply() result of the wrong size or not finite (naming the step).
LanczosRun lanczos(const SymmetricOperator& apply, std::int64_t n, const std::vector<double>& start, int steps,
                   bool keep_basis = false);

/// Eigen-decomposition of a Lanczos run's T: Ritz values θ (ascending) and, per Ritz value, the
/// first component of its unit eigenvector of T (squared: its Gauss quadrature weight) and the
/// Ritz residual bound |last_beta · s_m| (an upper bound on the distance from θ to A's spectrum).
struct RitzValues {
  std::vector<double> values;    ///< ascending
  std::vector<double> weights;   ///< (first component)², summing to 1
  std::vector<double> residual;  ///< |last_beta · (last component)|
  std::vector<std::vector<double>> vectors;  ///< Ritz vectors Q·s in A's space (only if the run kept its basis)
};
RitzValues ritz(const LanczosRun& run);

/// The k largest eigenvalues of A (descending) and their Ritz vectors from one Lanczos run of
/// `steps` steps (default max(3k, 40), at most n) from a Rademacher start drawn with `seed`.
struct TopEigen {
  std::vector<double> values;                ///< descending, k entries (fewer if n < k)
  std::vector<std::vector<double>> vectors;  ///< unit Ritz vectors, same order
  std::vector<double> residual;              ///< Ritz residual bounds, same order
  int steps = 0;                             ///< Lanczos steps taken
};
/// Throws std::invalid_argument for k < 1 (and as lanczos()).
TopEigen top_eigen(const SymmetricOperator& apply, std::int64_t n, int k, std::uint64_t seed, int steps = 0);

/// The SLQ spectral measure: nodes θ_{p,j} with weights τ_{p,j}/probes over all probes, which
/// sum to 1. For each probe v (Rademacher, ‖v‖² = n), Σ_j τ_j θ_j^k = vᵀA^k v / n exactly for
/// k ≤ 2m − 1 (Gauss quadrature), so Σ weight·node^k is an unbiased estimate of tr(A^k)/n.
struct SpectralDensity {
  std::vector<double> nodes, weights;  ///< probes × steps entries (fewer on early stops)
  int probes = 0;
  std::int64_t n = 0;
  /// Σ weight·node^k: the estimate of the k-th spectral moment tr(A^k)/n (k ≥ 0).
  double moment(int k) const;
  /// The per-probe estimates of moment k (probes entries), for a standard error.
  std::vector<double> probe_moments(int k) const;
  /// The Gaussian-smoothed density φ(t) = Σ weight·N(t; node, σ²) at t (1/units of A).
  double density(double t, double sigma) const;
};

struct SlqOptions {
  int probes = 10;         ///< Rademacher probes (Ghorbani et al.: 10 or fewer)
  int steps = 80;          ///< Lanczos steps per probe (Ghorbani et al.: 90), at most n
  std::uint64_t seed = 0;  ///< probe p is drawn from std::mt19937_64(seed + p)
};
/// Throws std::invalid_argument for probes < 1 or steps < 1 (and as lanczos()).
SpectralDensity slq(const SymmetricOperator& apply, std::int64_t n, const SlqOptions& options = {});

/// The smoothed density on `points` equally spaced points from lo to hi (both included).
struct DensityGrid {
  std::vector<double> t, phi;
};
/// Throws std::invalid_argument for points < 2, hi <= lo or sigma <= 0.
DensityGrid density_grid(const SpectralDensity& d, double lo, double hi, int points, double sigma);

/// The bulk edge from the SLQ density (the rule of docs/claims.md, "Hessian spectrum"): on a
/// grid of `points` over [min node − 5σ, max node + 5σ], the superlevel set {t : φ(t) ≥ level·max φ}
/// is a union of intervals; the bulk is the interval holding the most SLQ mass (weights of the
/// nodes inside it) and its upper end is the bulk edge. An isolated eigenvalue more than a few
/// σ above the bulk forms an interval of its own and so lies beyond the edge.
/// Throws std::invalid_argument for an empty density, sigma <= 0, level outside (0, 1) or points < 2.
double bulk_edge(const SpectralDensity& d, double sigma, double level = 1e-4, int points = 4001);

/// Rademacher vector of n entries ±1 from std::mt19937_64(seed) (one raw bit per entry).
std::vector<double> rademacher(std::int64_t n, std::uint64_t seed);

}  // namespace claims
