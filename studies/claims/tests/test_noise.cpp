// DistributionNoise (Santurkar et al. 2018, Algorithm 1): the statistics of its draws, the
// gradient it passes, eval mode as the identity, reproducibility and refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "distribution_noise.h"
#include <tapegrad/core/ops.h>

using namespace tapegrad;
using claims::DistributionNoise;
using claims::NoiseOptions;

namespace {
struct Col {
  double mean = 0, std = 0;
};
// Per column mean and std of an (n, c) row-major matrix.
std::vector<Col> columns(const std::vector<double>& v, std::int64_t n, std::int64_t c) {
  std::vector<Col> out(c);
  for (std::int64_t i = 0; i < c; ++i) {
    double s = 0, s2 = 0;
    for (std::int64_t j = 0; j < n; ++j) s += v[j * c + i];
    const double m = s / n;
    for (std::int64_t j = 0; j < n; ++j) s2 += (v[j * c + i] - m) * (v[j * c + i] - m);
    out[i] = {m, std::sqrt(s2 / (n - 1))};
  }
  return out;
}
Col spread(const std::vector<double>& v) {
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double m = s / v.size();
  for (double x : v) s2 += (x - m) * (x - m);
  return {m, std::sqrt(s2 / (v.size() - 1))};
}
}  // namespace

TEST_CASE("DistributionNoise draws mu ~ U(-0.5, 0.5), sigma ~ U(1, 1.25) per unit and r = 0.1 per sample",
          "[claims][noise]") {
  const std::int64_t n = 400, c = 2000;
  // Same seed, same draws: on zeros the output is m; on ones it is s + m, so s = y1 - y0.
  DistributionNoise a({}, 7), b({}, 7);
  const auto m = a(Tensor::zeros({n, c}, Dtype::Float64)).to_vector();
  const auto y1 = b(Tensor::ones({n, c}, Dtype::Float64)).to_vector();
  std::vector<double> s(m.size());
  for (std::size_t k = 0; k < m.size(); ++k) s[k] = y1[k] - m[k];
  const auto cm = columns(m, n, c), cs = columns(s, n, c);
  std::vector<double> mu, sigma, jm, js;
  for (std::int64_t i = 0; i < c; ++i) {
    mu.push_back(cm[i].mean), sigma.push_back(cs[i].mean), jm.push_back(cm[i].std), js.push_back(cs[i].std);
  }
  // Unit means: the per-unit (mu, sigma), up to 0.1/sqrt(400) = 0.005 of sampling noise.
  const Col smu = spread(mu), ssig = spread(sigma);
  CHECK(smu.mean == Approx(0.0).margin(0.02));
  CHECK(smu.std == Approx(1.0 / std::sqrt(12.0)).epsilon(0.04));        // U(-0.5, 0.5): std 0.2887
  CHECK(ssig.mean == Approx(1.125).margin(0.01));
  CHECK(ssig.std == Approx(0.25 / std::sqrt(12.0)).epsilon(0.06));      // U(1, 1.25): std 0.0722
  CHECK(*std::min_element(mu.begin(), mu.end()) > -0.52);
  CHECK(*std::max_element(mu.begin(), mu.end()) < 0.52);
  CHECK(*std::min_element(sigma.begin(), sigma.end()) > 0.98);
  CHECK(*std::max_element(sigma.begin(), sigma.end()) < 1.27);
  // Per-sample jitter: std r = 0.1 around each unit's mu and sigma.
  CHECK(spread(jm).mean == Approx(0.1).epsilon(0.02));
  CHECK(spread(js).mean == Approx(0.1).epsilon(0.02));
  // A second call draws new (mu, sigma): time-varying noise.
  const auto m2 = columns(a(Tensor::zeros({n, c}, Dtype::Float64)).to_vector(), n, c);
  double moved = 0;
  for (std::int64_t i = 0; i < c; ++i) moved += std::fabs(m2[i].mean - cm[i].mean);
  CHECK(moved / c > 0.25);  // E|mu - mu'| = 1/3 for two U(-0.5, 0.5) draws
}

TEST_CASE("DistributionNoise constants are options", "[claims][noise]") {
  NoiseOptions o;
  o.mean_range = 2;
  o.scale_max = 3;
  o.jitter = 0;
  DistributionNoise a(o, 3), b(o, 3);
  const std::int64_t n = 8, c = 3000;
  const auto m = a(Tensor::zeros({n, c}, Dtype::Float64)).to_vector();
  const auto y1 = b(Tensor::ones({n, c}, Dtype::Float64)).to_vector();
  std::vector<double> mu, sigma;
  for (std::int64_t i = 0; i < c; ++i) {
    for (std::int64_t j = 1; j < n; ++j) {
      REQUIRE(m[j * c + i] == m[i]);  // r = 0: every sample of a unit gets the same noise
      REQUIRE(y1[j * c + i] == y1[i]);
    }
    mu.push_back(m[i]), sigma.push_back(y1[i] - m[i]);
  }
  CHECK(spread(mu).std == Approx(4.0 / std::sqrt(12.0)).epsilon(0.05));
  CHECK(spread(sigma).mean == Approx(2.0).margin(0.05));
  CHECK(*std::min_element(sigma.begin(), sigma.end()) >= 1.0);
  CHECK(*std::max_element(sigma.begin(), sigma.end()) < 3.0);
}

TEST_CASE("DistributionNoise passes the gradient s and is the identity in eval mode", "[claims][noise]") {
  DistributionNoise a({}, 5), b({}, 5);
  Generator g(1);
  Tensor x = randn({6, 4}, Dtype::Float64, g);
  x.requires_grad_();
  const auto m = a(Tensor::zeros({6, 4}, Dtype::Float64)).to_vector();  // a: the draws of b's call
  const auto y1 = DistributionNoise({}, 5)(Tensor::ones({6, 4}, Dtype::Float64)).to_vector();
  Tensor y = b(x);
  sum(y).backward();
  const auto gx = x.grad().to_vector(), xv = x.to_vector(), yv = y.to_vector();
  for (std::size_t k = 0; k < gx.size(); ++k) {
    const double s = y1[k] - m[k];
    CHECK(gx[k] == Approx(s).epsilon(1e-12));
    CHECK(yv[k] == Approx(s * xv[k] + m[k]).epsilon(1e-12));
  }
  b.eval();
  const Tensor z = b(x);
  CHECK(z.to_vector() == xv);
  CHECK(z.impl() == x.impl());  // the input tensor itself
}

TEST_CASE("DistributionNoise refuses bad constants and non-2-D input", "[claims][noise]") {
  NoiseOptions o;
  o.scale_max = 0.9;
  CHECK_THROWS_WITH(DistributionNoise(o), Catch::Contains("expected --noise-scale (n_v) >= 1, got 0.9"));
  o = {};
  o.mean_range = -1;
  CHECK_THROWS_WITH(DistributionNoise(o), Catch::Contains("--noise-mean (n_m) >= 0, got -1"));
  o = {};
  o.jitter = NAN;
  CHECK_THROWS_WITH(DistributionNoise(o), Catch::Contains("--noise-jitter (r) >= 0"));
  DistributionNoise d;
  CHECK_THROWS_WITH(d(Tensor::zeros({2, 3, 4})), Catch::Contains("expected input (N, C), got 3 dimensions"));
}
