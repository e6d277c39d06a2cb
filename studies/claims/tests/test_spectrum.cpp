// Lanczos (full reorthogonalisation) and stochastic Lanczos quadrature on explicit symmetric
// matrices, against Eigen's SelfAdjointEigenSolver on the whole matrix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <Eigen/Dense>

#include "spectrum.h"

using claims::SymmetricOperator;

namespace {
// Uniform in [-1, 1) from std::mt19937_64's raw bits (the same numbers on every platform).
double unit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-52 - 1.0; }

// Q diag(lambda) Q^T with Q the orthogonal factor of a random matrix.
Eigen::MatrixXd planted(const std::vector<double>& lambda, std::uint64_t seed) {
  const int n = static_cast<int>(lambda.size());
  std::mt19937_64 g(seed);
  Eigen::MatrixXd r(n, n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) r(i, j) = unit(g);
  const Eigen::MatrixXd q = Eigen::HouseholderQR<Eigen::MatrixXd>(r).householderQ();
  Eigen::VectorXd l(n);
  for (int i = 0; i < n; ++i) l[i] = lambda[i];
  return q * l.asDiagonal() * q.transpose();
}

// A Hessian-like spectrum: a bulk on [-1, 2] (denser near 0) and five outliers.
std::vector<double> bulk_and_outliers(int n) {
  std::vector<double> l;
  for (int i = 0; i < n - 5; ++i) {
    const double u = (i + 0.5) / (n - 5);
    l.push_back(-1 + 3 * u * u);
  }
  for (double o : {10.0, 15.0, 22.0, 30.0, 50.0}) l.push_back(o);
  return l;
}

SymmetricOperator as_operator(const Eigen::MatrixXd& a) {
  // a plain loop: the reference does not depend on any product kernel
  return [&a](const std::vector<double>& v) {
    std::vector<double> y(static_cast<std::size_t>(a.rows()), 0.0);
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < a.cols(); ++j) y[static_cast<std::size_t>(i)] += a(i, j) * v[static_cast<std::size_t>(j)];
    return y;
  };
}

std::vector<double> top5_exact(const Eigen::MatrixXd& a) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(a);
  std::vector<double> out;
  for (int i = 0; i < 5; ++i) out.push_back(es.eigenvalues()[a.rows() - 1 - i]);
  return out;
}
}  // namespace

TEST_CASE("top_eigen: the five largest eigenvalues agree with SelfAdjointEigenSolver within 1e-6", "[spectrum]") {
  SECTION("a bulk and five outliers, 300 x 300, 60 steps") {
    const Eigen::MatrixXd a = planted(bulk_and_outliers(300), 1);
    const auto exact = top5_exact(a);
    const claims::TopEigen t = claims::top_eigen(as_operator(a), 300, 5, 7, 60);
    REQUIRE(t.steps == 60);
    REQUIRE(t.values.size() == 5);
    for (int i = 0; i < 5; ++i) {
      CHECK(std::abs(t.values[i] - exact[i]) <= 1e-6 * std::abs(exact[i]));
      CHECK(t.residual[i] < 1e-6 * std::abs(exact[i]));
    }
    // Ritz vectors: unit, and A·y = θ·y up to the residual bound
    for (int i = 0; i < 5; ++i) {
      const Eigen::Map<const Eigen::VectorXd> y(t.vectors[i].data(), 300);
      CHECK(std::abs(y.norm() - 1) < 1e-10);
      CHECK((a * y - t.values[i] * y).norm() < 1e-5);
    }
  }
  SECTION("a dense random symmetric matrix (no planted gap), 150 x 150, 150 steps") {
    std::mt19937_64 g(3);
    Eigen::MatrixXd r(150, 150);
    for (int j = 0; j < 150; ++j)
      for (int i = 0; i < 150; ++i) r(i, j) = unit(g);
    const Eigen::MatrixXd a = (r + r.transpose()) / 2;
    const auto exact = top5_exact(a);
    const claims::TopEigen t = claims::top_eigen(as_operator(a), 150, 5, 11, 150);
    for (int i = 0; i < 5; ++i) CHECK(std::abs(t.values[i] - exact[i]) <= 1e-6 * std::abs(exact[i]));
  }
  SECTION("an invariant start space stops early with exact values") {
    // diag(1, 2, 3, 4) from e1 + e2: the Krylov space is span(e1, e2) after 2 steps
    const Eigen::MatrixXd a = Eigen::Vector4d(1, 2, 3, 4).asDiagonal();
    // the start vector is filled element by element: a braced {1, 1, 0, 0} bound to the const
    // std::vector<double>& came out as (1, 1, 1, 1) in a GCC 12 -march=native build on a Zen 5
    std::vector<double> start(4, 0.0);
    start[0] = start[1] = 1.0;
    const claims::LanczosRun run = claims::lanczos(as_operator(a), 4, start, 4);
    REQUIRE(run.alpha.size() == 2);
    const claims::RitzValues r = claims::ritz(run);
    CHECK(r.values[0] == Approx(1).epsilon(1e-12));
    CHECK(r.values[1] == Approx(2).epsilon(1e-12));
    CHECK(r.weights[0] == Approx(0.5).epsilon(1e-12));
  }
}

TEST_CASE("slq: each probe's quadrature reproduces its moments v^T A^k v / n exactly for k < 2m", "[spectrum]") {
  const int n = 200;
  const Eigen::MatrixXd a = planted(bulk_and_outliers(n), 2) / 50.0;  // spectrum within [-0.02, 1]
  claims::SlqOptions o;
  o.probes = 4;
  o.steps = 5;  // Gauss quadrature with 5 nodes is exact to degree 9
  o.seed = 100;
  const claims::SpectralDensity d = claims::slq(as_operator(a), n, o);
  REQUIRE(d.nodes.size() == 20);
  for (int p = 0; p < o.probes; ++p) {
    const std::vector<double> v = claims::rademacher(n, o.seed + p);
    Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(v.data(), n);
    const Eigen::VectorXd v0 = x;
    for (int k = 0; k <= 9; ++k) {
      const double exact = v0.dot(x) / n;  // v^T A^k v / n
      CHECK(d.probe_moments(k)[p] == Approx(exact).epsilon(1e-9).margin(1e-15));
      x = a * x;
    }
  }
}

TEST_CASE("slq: the density's moments estimate tr(A^k)/n within four standard errors", "[spectrum]") {
  // Rademacher probes: Var(v^T B v) = 2(||B||_F^2 - sum_i B_ii^2) (Hutchinson; Avron & Toledo
  // 2011, Lemma 1), so the mean of P probes has standard error sqrt(2(...))/(n sqrt(P)).
  // A wide positive bulk on [0.5, 3] and two outliers: the moments are the bulk's (a few
  // dominant outliers would make any Hutchinson estimate too noisy to test).
  const int n = 300;
  std::vector<double> lambda;
  for (int i = 0; i < n - 2; ++i) lambda.push_back(0.5 + 2.5 * (i + 0.5) / (n - 2));
  lambda.push_back(5);
  lambda.push_back(6);
  const Eigen::MatrixXd a = planted(lambda, 4);
  claims::SlqOptions o;
  o.probes = 20;
  o.steps = 30;
  o.seed = 5;
  const claims::SpectralDensity d = claims::slq(as_operator(a), n, o);
  Eigen::MatrixXd b = Eigen::MatrixXd::Identity(n, n);
  for (int k = 1; k <= 4; ++k) {
    b = b * a;
    double exact = 0;
    for (double l : lambda) exact += std::pow(l, k);
    exact /= n;
    const double off = b.squaredNorm() - b.diagonal().squaredNorm();
    const double se = std::sqrt(2 * off) / n / std::sqrt(static_cast<double>(o.probes));
    INFO("k = " << k << ": estimate " << d.moment(k) << ", exact " << exact << ", standard error " << se);
    CHECK(std::abs(d.moment(k) - exact) <= 4 * se);
    // the estimate is informative: its error bound is well below the moment itself
    CHECK(4 * se < 0.25 * std::abs(exact));
  }
  CHECK(d.moment(0) == Approx(1).epsilon(1e-12));
}

TEST_CASE("density_grid: the smoothed density integrates to 1 with mean m1 and second moment m2 + sigma^2", "[spectrum]") {
  const int n = 200;
  const Eigen::MatrixXd a = planted(bulk_and_outliers(n), 6);
  const claims::SpectralDensity d = claims::slq(as_operator(a), n, {3, 40, 9});
  const double sigma = 0.5;
  const claims::DensityGrid g = claims::density_grid(d, -10, 60, 14001, sigma);
  const double h = g.t[1] - g.t[0];
  double m0 = 0, m1 = 0, m2 = 0;
  for (std::size_t i = 0; i < g.t.size(); ++i) {
    const double w = (i == 0 || i + 1 == g.t.size()) ? h / 2 : h;
    m0 += w * g.phi[i];
    m1 += w * g.phi[i] * g.t[i];
    m2 += w * g.phi[i] * g.t[i] * g.t[i];
  }
  CHECK(m0 == Approx(1).epsilon(1e-9));
  CHECK(m1 == Approx(d.moment(1)).epsilon(1e-9));
  CHECK(m2 == Approx(d.moment(2) + sigma * sigma).epsilon(1e-9));
}

TEST_CASE("bulk_edge: five isolated outliers lie beyond the edge, a pure bulk has none", "[spectrum]") {
  const int n = 300;
  const Eigen::MatrixXd a = planted(bulk_and_outliers(n), 8);
  const claims::SpectralDensity d = claims::slq(as_operator(a), n, {10, 60, 3});
  const double sigma = 0.01 * 51;  // 1 % of the spectrum's range
  const double edge = claims::bulk_edge(d, sigma);
  INFO("edge " << edge);
  CHECK(edge > 2.0);
  CHECK(edge < 2.0 + 6 * sigma);
  const claims::TopEigen t = claims::top_eigen(as_operator(a), n, 10, 1, 80);
  CHECK(std::count_if(t.values.begin(), t.values.end(), [&](double l) { return l > edge; }) == 5);

  std::vector<double> bulk(n);
  for (int i = 0; i < n; ++i) bulk[i] = -1 + 3.0 * i / (n - 1);
  const Eigen::MatrixXd b = planted(bulk, 9);
  const claims::SpectralDensity db = claims::slq(as_operator(b), n, {10, 60, 3});
  const double eb = claims::bulk_edge(db, 0.03);
  const claims::TopEigen tb = claims::top_eigen(as_operator(b), n, 10, 1, 80);
  CHECK(std::count_if(tb.values.begin(), tb.values.end(), [&](double l) { return l > eb; }) == 0);
}

TEST_CASE("lanczos, slq, bulk_edge: bad input is refused naming the expected and the actual value", "[spectrum]") {
  const SymmetricOperator id = [](const std::vector<double>& v) { return v; };
  const SymmetricOperator short_result = [](const std::vector<double>& v) { return std::vector<double>(v.size() - 1); };
  const SymmetricOperator nan_result = [](const std::vector<double>& v) { return std::vector<double>(v.size(), NAN); };
  CHECK_THROWS_WITH(claims::lanczos(id, 3, {1, 2}, 2), "lanczos: expected a start vector of 3 entries, got 2");
  CHECK_THROWS_WITH(claims::lanczos(id, 2, {0, 0}, 2), Catch::Contains("expected a nonzero finite start vector"));
  CHECK_THROWS_WITH(claims::lanczos(id, 2, {1, 0}, 0), "lanczos: expected steps >= 1, got 0");
  CHECK_THROWS_WITH(claims::lanczos(short_result, 3, {1, 0, 0}, 2),
                    "lanczos: step 1: expected A·v of 3 entries, got 2");
  CHECK_THROWS_WITH(claims::lanczos(nan_result, 3, {1, 0, 0}, 2), "lanczos: step 1: A·v is not finite");
  CHECK_THROWS_WITH(claims::top_eigen(id, 3, 0, 1), "top_eigen: expected k >= 1 eigenvalues, got 0");
  CHECK_THROWS_WITH(claims::slq(id, 3, {0, 2, 0}), "slq: expected probes >= 1, got 0");
  const claims::SpectralDensity d = claims::slq(id, 3, {1, 2, 0});
  CHECK_THROWS_WITH(claims::bulk_edge(d, 0), "bulk_edge: expected sigma > 0, got 0");
  CHECK_THROWS_WITH(claims::bulk_edge(d, 0.1, 1.5), "bulk_edge: expected a level in (0, 1), got 1.5");
  CHECK_THROWS_WITH(claims::density_grid(d, 1, 1, 10, 0.1), "density_grid: expected lo < hi, got 1 and 1");
}
