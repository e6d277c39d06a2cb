#include "spectrum.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include <Eigen/Eigenvalues>

#include "flat_grads.h"

namespace claims {

namespace {
std::string str(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
void axpy(double a, const std::vector<double>& x, std::vector<double>& y) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += a * x[i];
}
}  // namespace

std::vector<double> rademacher(std::int64_t n, std::uint64_t seed) {
  if (n < 1) throw std::invalid_argument("rademacher: expected n >= 1, got " + std::to_string(n));
  std::mt19937_64 gen(seed);
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uint64_t bits = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 64 == 0) bits = gen();
    v[i] = (bits >> (i % 64)) & 1U ? 1.0 : -1.0;
  }
  return v;
}

LanczosRun lanczos(const SymmetricOperator& apply, std::int64_t n, const std::vector<double>& start, int steps,
                   bool keep_basis) {
  if (n < 1) throw std::invalid_argument("lanczos: expected dimension n >= 1, got " + std::to_string(n));
  if (steps < 1) throw std::invalid_argument("lanczos: expected steps >= 1, got " + std::to_string(steps));
  if (static_cast<std::int64_t>(start.size()) != n)
    throw std::invalid_argument("lanczos: expected a start vector of " + std::to_string(n) + " entries, got " +
                                std::to_string(start.size()));
  const double norm0 = std::sqrt(dot(start, start));
  if (!(norm0 > 0) || !std::isfinite(norm0))
    throw std::invalid_argument("lanczos: expected a nonzero finite start vector, got norm " + str(norm0));
  const int m = static_cast<int>(std::min<std::int64_t>(steps, n));
  LanczosRun run;
  std::vector<std::vector<double>> q;
  q.reserve(m);
  q.push_back(start);
  for (double& x : q[0]) x /= norm0;
  for (int j = 0; j < m; ++j) {
    std::vector<double> w = apply(q[j]);
    if (static_cast<std::int64_t>(w.size()) != n)
      throw std::invalid_argument("lanczos: step " + std::to_string(j + 1) + ": expected A·v of " + std::to_string(n) +
                                  " entries, got " + std::to_string(w.size()));
    const double wnorm = std::sqrt(dot(w, w));
    if (!std::isfinite(wnorm))
      throw std::invalid_argument("lanczos: step " + std::to_string(j + 1) + ": A·v is not finite");
    const double a = dot(q[j], w);
    run.alpha.push_back(a);
    axpy(-a, q[j], w);
    if (j > 0) axpy(-run.beta[j - 1], q[j - 1], w);
    // Full reorthogonalisation, twice ("twice is enough": Parlett, The Symmetric Eigenvalue
    // Problem, §6.9): the Ritz values stay free of the ghost copies plain Lanczos produces.
    for (int pass = 0; pass < 2; ++pass)
      for (int i = 0; i <= j; ++i) axpy(-dot(q[i], w), q[i], w);
    const double b = std::sqrt(dot(w, w));
    run.last_beta = b;
    if (j + 1 == m) break;
    if (b <= 1e-12 * std::max(wnorm, 1e-300)) {  // invariant subspace: T is exact, stop
      run.last_beta = 0;
      break;
    }
    run.beta.push_back(b);
    for (double& x : w) x /= b;
    q.push_back(std::move(w));
  }
  if (keep_basis) run.basis = std::move(q);
  return run;
}

RitzValues ritz(const LanczosRun& run) {
  const int m = static_cast<int>(run.alpha.size());
  if (m < 1 || static_cast<int>(run.beta.size()) != m - 1)
    throw std::invalid_argument("ritz: expected m >= 1 diagonal and m - 1 off-diagonal entries, got " +
                                std::to_string(m) + " and " + std::to_string(run.beta.size()));
  Eigen::VectorXd diag(m), sub(std::max(m - 1, 0));
  for (int i = 0; i < m; ++i) diag[i] = run.alpha[i];
  for (int i = 0; i + 1 < m; ++i) sub[i] = run.beta[i];
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es;
  es.computeFromTridiagonal(diag, sub, Eigen::ComputeEigenvectors);
  if (es.info() != Eigen::Success) throw std::runtime_error("ritz: the tridiagonal eigensolver did not converge");
  RitzValues r;
  const auto& s = es.eigenvectors();
  for (int i = 0; i < m; ++i) {
    r.values.push_back(es.eigenvalues()[i]);
    r.weights.push_back(s(0, i) * s(0, i));
    r.residual.push_back(std::abs(run.last_beta * s(m - 1, i)));
  }
  if (static_cast<int>(run.basis.size()) == m) {
    const std::size_t n = run.basis[0].size();
    for (int i = 0; i < m; ++i) {
      std::vector<double> y(n, 0.0);
      for (int j = 0; j < m; ++j) axpy(s(j, i), run.basis[j], y);
      r.vectors.push_back(std::move(y));
    }
  }
  return r;
}

TopEigen top_eigen(const SymmetricOperator& apply, std::int64_t n, int k, std::uint64_t seed, int steps) {
  if (k < 1) throw std::invalid_argument("top_eigen: expected k >= 1 eigenvalues, got " + std::to_string(k));
  if (steps <= 0) steps = std::max(3 * k, 40);
  const LanczosRun run = lanczos(apply, n, rademacher(n, seed), steps, true);
  const RitzValues r = ritz(run);
  TopEigen t;
  t.steps = static_cast<int>(run.alpha.size());
  const int m = static_cast<int>(r.values.size());
  for (int i = m - 1; i >= std::max(0, m - k); --i) {
    t.values.push_back(r.values[i]);
    t.vectors.push_back(r.vectors[i]);
    t.residual.push_back(r.residual[i]);
  }
  return t;
}

double SpectralDensity::moment(int k) const {
  double s = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) s += weights[i] * std::pow(nodes[i], k);
  return s;
}

std::vector<double> SpectralDensity::probe_moments(int k) const {
  // nodes are stored probe after probe; a probe's weights sum to 1/probes
  std::vector<double> out;
  double s = 0, w = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    s += weights[i] * probes * std::pow(nodes[i], k);
    w += weights[i] * probes;
    if (w > 1 - 1e-9) {
      out.push_back(s);
      s = w = 0;
    }
  }
  return out;
}

double SpectralDensity::density(double t, double sigma) const {
  const double c = 1 / (sigma * std::sqrt(2 * std::numbers::pi));
  double s = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const double z = (t - nodes[i]) / sigma;
    s += weights[i] * c * std::exp(-0.5 * z * z);
  }
  return s;
}

SpectralDensity slq(const SymmetricOperator& apply, std::int64_t n, const SlqOptions& o) {
  if (o.probes < 1) throw std::invalid_argument("slq: expected probes >= 1, got " + std::to_string(o.probes));
  if (o.steps < 1) throw std::invalid_argument("slq: expected steps >= 1, got " + std::to_string(o.steps));
  SpectralDensity d;
  d.probes = o.probes;
  d.n = n;
  for (int p = 0; p < o.probes; ++p) {
    const RitzValues r = ritz(lanczos(apply, n, rademacher(n, o.seed + static_cast<std::uint64_t>(p)), o.steps));
    double total = 0;
    for (double w : r.weights) total += w;  // 1 up to rounding; renormalised so each probe weighs 1/probes
    for (std::size_t j = 0; j < r.values.size(); ++j) {
      d.nodes.push_back(r.values[j]);
      d.weights.push_back(r.weights[j] / total / o.probes);
    }
  }
  return d;
}

DensityGrid density_grid(const SpectralDensity& d, double lo, double hi, int points, double sigma) {
  if (points < 2) throw std::invalid_argument("density_grid: expected points >= 2, got " + std::to_string(points));
  if (!(hi > lo))
    throw std::invalid_argument("density_grid: expected lo < hi, got " + str(lo) + " and " + str(hi));
  if (!(sigma > 0)) throw std::invalid_argument("density_grid: expected sigma > 0, got " + str(sigma));
  DensityGrid g;
  for (int i = 0; i < points; ++i) {
    const double t = lo + (hi - lo) * i / (points - 1);
    g.t.push_back(t);
    g.phi.push_back(d.density(t, sigma));
  }
  return g;
}

double bulk_edge(const SpectralDensity& d, double sigma, double level, int points) {
  if (d.nodes.empty()) throw std::invalid_argument("bulk_edge: expected a density with nodes, got none");
  if (!(sigma > 0)) throw std::invalid_argument("bulk_edge: expected sigma > 0, got " + str(sigma));
  if (!(level > 0 && level < 1))
    throw std::invalid_argument("bulk_edge: expected a level in (0, 1), got " + str(level));
  const auto [mn, mx] = std::minmax_element(d.nodes.begin(), d.nodes.end());
  const DensityGrid g = density_grid(d, *mn - 5 * sigma, *mx + 5 * sigma, points, sigma);
  const double peak = *std::max_element(g.phi.begin(), g.phi.end());
  // the intervals [t_a, t_b] of the superlevel set, and the SLQ mass of the nodes inside each
  double best_mass = -1, best_hi = *mx;
  int i = 0;
  while (i < points) {
    if (g.phi[i] < level * peak) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < points && g.phi[j + 1] >= level * peak) ++j;
    double mass = 0;
    for (std::size_t k = 0; k < d.nodes.size(); ++k)
      if (d.nodes[k] >= g.t[i] && d.nodes[k] <= g.t[j]) mass += d.weights[k];
    if (mass > best_mass) {
      best_mass = mass;
      best_hi = g.t[j];
    }
    i = j + 1;
  }
  return best_hi;
}

}  // namespace claims
