// The Hessian of a small tanh net (32 parameters) built column by column from Hessian-vector
// products of basis vectors: symmetric, its top eigenvalues found by Lanczos as Eigen finds
// them, one product against finite differences of gradients, and probe_spectrum's numbers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>

#include "hessian_nets.h"
#include "hessian_probe.h"
#include "hessian_study.h"
#include "hessian_threads.h"
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>

using namespace tapegrad;

namespace {
Tensor rand64(const Shape& s, std::uint64_t seed, double lo = -1, double hi = 1) {
  Generator g(seed);
  return uniform(s, lo, hi, Dtype::Float64, g);
}

// x (16, 3) -> Linear(3, 5) -> tanh -> Linear(5, 2), MSE against t (16, 2), float64.
struct TinyNet {
  Tensor x = rand64({16, 3}, 1), t = rand64({16, 2}, 2);
  std::vector<Tensor> params = {rand64({5, 3}, 3).requires_grad_(), rand64({5}, 4).requires_grad_(),
                                rand64({2, 5}, 5).requires_grad_(), rand64({2}, 6).requires_grad_()};
  Tensor loss() const {
    const Tensor h = tanh(linear(x, params[0], params[1]));
    return mean(square(sub(linear(h, params[2], params[3]), t)));
  }
};

Eigen::MatrixXd full_hessian(const autograd::HessianOperator& h, std::int64_t n) {
  const claims::SymmetricOperator op = claims::flat_operator(h);
  Eigen::MatrixXd m(n, n);
  for (std::int64_t k = 0; k < n; ++k) {
    std::vector<double> e(static_cast<std::size_t>(n), 0.0);
    e[k] = 1;
    const std::vector<double> col = op(e);
    for (std::int64_t i = 0; i < n; ++i) m(i, k) = col[i];
  }
  return m;
}
}  // namespace

TEST_CASE("HessianOperator on a 32-parameter net: a symmetric Hessian whose top 5 Lanczos finds within 1e-6", "[hessian_probe]") {
  TinyNet net;
  const std::int64_t n = claims::total_numel(net.params);
  REQUIRE(n == 32);
  const autograd::HessianOperator h(net.loss(), net.params);
  const Eigen::MatrixXd H = full_hessian(h, n);
  const double scale = H.cwiseAbs().maxCoeff();
  REQUIRE(scale > 0.1);
  CHECK((H - H.transpose()).cwiseAbs().maxCoeff() <= 1e-12 * scale);

  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es((H + H.transpose()) / 2);
  const claims::TopEigen t = claims::top_eigen(claims::flat_operator(h), n, 5, 3, 32);
  REQUIRE(t.values.size() == 5);
  for (int i = 0; i < 5; ++i) {
    const double exact = es.eigenvalues()[n - 1 - i];
    INFO("eigenvalue " << i << ": Lanczos " << t.values[i] << ", Eigen " << exact);
    CHECK(std::abs(exact) > 1e-3);
    CHECK(std::abs(t.values[i] - exact) <= 1e-6 * std::abs(exact));
  }
}

TEST_CASE("HessianOperator: H·v equals central differences of the gradient along v", "[hessian_probe]") {
  TinyNet net;
  const std::int64_t n = claims::total_numel(net.params);
  const std::vector<double> v = claims::flatten({rand64({n}, 7)});
  const autograd::HessianOperator h(net.loss(), net.params);
  const std::vector<double> hv = claims::flat_operator(h)(v);
  const double eps = 1e-5;
  auto grad_at = [&](double s) {
    TinyNet shifted = net;
    const std::vector<double> theta = claims::flatten(net.params);
    std::vector<double> moved(theta.size());
    for (std::size_t i = 0; i < theta.size(); ++i) moved[i] = theta[i] + s * v[i];
    shifted.params = claims::unflatten(moved, net.params);
    for (Tensor& p : shifted.params) p.requires_grad_();
    return claims::flatten(autograd::grad({shifted.loss()}, shifted.params));
  };
  const std::vector<double> gp = grad_at(eps), gm = grad_at(-eps);
  double err = 0, norm = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double fd = (gp[i] - gm[i]) / (2 * eps);
    err = std::max(err, std::abs(fd - hv[i]));
    norm = std::max(norm, std::abs(hv[i]));
  }
  INFO("max |finite difference - H·v| = " << err << ", max |H·v| = " << norm);
  CHECK(norm > 0.1);
  CHECK(err <= 1e-7 * norm);
}

TEST_CASE("probe_spectrum: λ_max, the gradient's share in the top-k eigenspace, outliers and density", "[hessian_probe]") {
  TinyNet net;
  const std::int64_t n = claims::total_numel(net.params);
  const Tensor loss = net.loss();
  const autograd::HessianOperator h(loss, net.params);
  const Eigen::MatrixXd H = full_hessian(h, n);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es((H + H.transpose()) / 2);
  const std::vector<double> gv = claims::flatten(autograd::grad({loss}, net.params, {}, {.retain_graph = true}));
  const Eigen::Map<const Eigen::VectorXd> g(gv.data(), n);

  claims::SpectrumOptions o;
  o.top_k = 3;
  o.lanczos_steps = 32;
  o.slq = {4, 32, 11};
  const claims::SpectrumProbe p = claims::probe_spectrum(loss, net.params, o);
  CHECK(p.lambda_max == Approx(es.eigenvalues()[n - 1]).epsilon(1e-9));
  double share = 0;
  for (int i = 0; i < 3; ++i) share += std::pow(es.eigenvectors().col(n - 1 - i).dot(g), 2);
  share /= g.squaredNorm();
  CHECK(p.gradient_share == Approx(share).epsilon(1e-8));
  CHECK(p.gradient_norm == Approx(g.norm()).epsilon(1e-12));
  // with m = n steps every probe's nodes are H's eigenvalues: the density's extremes are exact
  CHECK(p.lambda_min == Approx(es.eigenvalues()[0]).epsilon(1e-8).margin(1e-10));
  CHECK(p.sigma == Approx(0.01 * (es.eigenvalues()[n - 1] - es.eigenvalues()[0])).epsilon(1e-8));
  CHECK(p.density.moment(0) == Approx(1).epsilon(1e-12));
  // the outliers are exactly the top-k values above the reported edge
  int above = 0;
  for (double l : p.top) above += l > p.bulk_edge;
  CHECK(p.outliers == above);
  CHECK(p.bulk_edge >= es.eigenvalues()[0]);
  CHECK_THROWS_WITH(claims::unflatten({1, 2}, net.params), "unflatten: expected 32 values, got 2");
  o.top_k = 0;
  CHECK_THROWS_WITH(claims::probe_spectrum(loss, net.params, o), "probe_spectrum: expected top_k >= 1, got 0");
}

TEST_CASE("run_hessian: the chapter MLP's probes are the same bits for 1 and 2 threads, and SGD lowers the loss", "[hessian_probe]") {
  claims::HessianOptions o = claims::quick_hessian_options({});
  o.nets = {"chapter"};
  o.arms = {"plain"};
  o.seeds = 2;
  o.steps = {0, 20};
  const claims::HessianResult one = run_hessian_1_and_2_threads(o);
  REQUIRE(one.points.size() == 4);
  for (int s = 0; s < 2; ++s) {
    const auto& start = one.points[2 * s];
    const auto& end = one.points[2 * s + 1];
    CHECK(start.step == 0);
    CHECK(end.step == 20);
    CHECK(end.loss < 0.8 * start.loss);
    CHECK(start.probe.lambda_max > start.probe.bulk_edge);
    CHECK(start.probe.gradient_share > 0);
    CHECK(start.probe.gradient_share <= 1 + 1e-9);
  }
  o.arms = {"plain", "bn-batch"};
  CHECK_THROWS_WITH(claims::check_hessian_options(o), "--arms: expected plain, bn or bn-population, got bn-batch");
  o.arms = {"bn-population"};
  o.population_every = 0;
  CHECK_THROWS_WITH(claims::check_hessian_options(o), Catch::Contains("--population-every"));
}
