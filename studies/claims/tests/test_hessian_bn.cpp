// The BatchNorm arms of `claims hessian` on tiny float64 nets: Hessian-vector products of the
// probed loss against central differences of its gradient (bn: batch statistics of each chunk;
// bn-population: constant population statistics), the probe leaving the running statistics
// alone, the population statistics equal to the training set's moments, and every arm of a
// run the same bits for 1 and 2 threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

// 3-5-4-2 with BN after both hidden Linears; γ, β moved off 1, 0 so every term is exercised.
claims::HessianNet tiny_net(claims::HessianArm arm) {
  Generator g(21);
  claims::HessianNet n = claims::make_hessian_net({3, 5, 4, 2}, arm, false, g);
  NoGradGuard ng;
  for (std::size_t k = 0; k < n.params.size(); ++k)
    if (n.params[k].dim() == 1 && arm != claims::HessianArm::plain) {
      const std::vector<double> v = rand64(n.params[k].shape(), 30 + k, 0.5, 1.5).to_vector();
      std::copy(v.begin(), v.end(), n.params[k].data<double>());
    }
  return n;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}
}  // namespace

TEST_CASE("hessian nets: the bn and bn-population probed losses' H·v equal central differences of their gradient",
          "[hessian_bn]") {
  const Tensor x = rand64({19, 3}, 1, -2, 2), t = rand64({19, 2}, 2);
  for (auto arm : {claims::HessianArm::bn, claims::HessianArm::bn_population}) {
    claims::HessianNet net = tiny_net(arm);
    if (arm == claims::HessianArm::bn_population) claims::refresh_population(net, rand64({40, 3}, 3, -2, 2));
    const std::int64_t n = claims::total_numel(net.params);
    REQUIRE(n == 3 * 5 + 5 + 2 * 5 + 5 * 4 + 4 + 2 * 4 + 4 * 2 + 2);
    const std::vector<double> v = claims::flatten({rand64({n}, 7)});
    // chunks of 6 rows: 6, 6, 7 (the last row joins the third chunk), three sets of batch statistics
    const autograd::HessianOperator h(claims::probe_loss(net, x, t, 6), net.params);
    const std::vector<double> hv = claims::flat_operator(h)(v);
    const double eps = 1e-5;
    auto grad_at = [&](double s) {
      claims::HessianNet moved = net;
      const std::vector<double> theta = claims::flatten(net.params);
      std::vector<double> w(theta.size());
      for (std::size_t i = 0; i < theta.size(); ++i) w[i] = theta[i] + s * v[i];
      moved.params = claims::unflatten(w, net.params);
      for (Tensor& p : moved.params) p.requires_grad_();
      return claims::flatten(autograd::grad({claims::probe_loss(moved, x, t, 6)}, moved.params));
    };
    const std::vector<double> gp = grad_at(eps), gm = grad_at(-eps);
    double err = 0, norm = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      err = std::max(err, std::abs((gp[i] - gm[i]) / (2 * eps) - hv[i]));
      norm = std::max(norm, std::abs(hv[i]));
    }
    INFO("arm " << static_cast<int>(arm) << ": max |finite difference - H·v| = " << err << ", max |H·v| = " << norm);
    CHECK(norm > 0.1);
    CHECK(err <= 1e-7 * norm);
  }
}

TEST_CASE("hessian nets: the bn probe's loss is the row-weighted mean of its chunks' train-mode losses",
          "[hessian_bn]") {
  // 9 rows in chunks of 4: 4 and 5 (a last chunk of one row joins the one before)
  const Tensor x = rand64({9, 3}, 4, -2, 2), t = rand64({9, 2}, 5);
  claims::HessianNet net = tiny_net(claims::HessianArm::bn);
  const double whole = claims::probe_loss(net, x, t, 9).item();
  const double a = claims::probe_loss(net, narrow(x, 0, 0, 4), narrow(t, 0, 0, 4), 4).item();
  const double b = claims::probe_loss(net, narrow(x, 0, 4, 5), narrow(t, 0, 4, 5), 5).item();
  const double cut = (4 * a + 5 * b) / 9;
  CHECK(claims::probe_loss(net, x, t, 4).item() == Approx(cut).epsilon(1e-14));
  // a different cut is a different loss (each chunk has its own batch statistics)
  CHECK(std::abs(whole - cut) > 1e-6);
  CHECK_THROWS_WITH(claims::probe_loss(net, x, t, 1), "probe_loss: expected a chunk of >= 2 rows, got 1");
}

TEST_CASE("hessian nets: probing the bn arm leaves the running statistics alone; SGD steps update them",
          "[hessian_bn]") {
  const Tensor x = rand64({16, 3}, 8, -2, 2), t = rand64({16, 2}, 9);
  claims::HessianNet net = tiny_net(claims::HessianArm::bn);
  const Tensor rm0 = net.running_mean[0].clone(), rv1 = net.running_var[1].clone();
  (void)autograd::grad({claims::train_loss(net, x, t)}, net.params);
  // the train step moved them (momentum 0.1 towards the batch statistics)
  REQUIRE_FALSE(same_bits(rm0, net.running_mean[0]));
  REQUIRE_FALSE(same_bits(rv1, net.running_var[1]));
  std::vector<Tensor> before;
  for (std::size_t l = 0; l < 2; ++l) {
    before.push_back(net.running_mean[l].clone());
    before.push_back(net.running_var[l].clone());
  }
  claims::SpectrumOptions o;
  o.top_k = 3;
  o.slq = {2, 10, 5};
  const claims::SpectrumProbe p = claims::probe_spectrum(claims::probe_loss(net, x, t, 8), net.params, o);
  CHECK(p.lambda_max > 0);
  for (std::size_t l = 0; l < 2; ++l) {
    CHECK(same_bits(before[2 * l], net.running_mean[l]));
    CHECK(same_bits(before[2 * l + 1], net.running_var[l]));
  }
}

TEST_CASE("hessian nets: bn-population's statistics are the training set's moments, layer after layer",
          "[hessian_bn]") {
  claims::HessianNet net = tiny_net(claims::HessianArm::bn_population);
  const Tensor x = rand64({40, 3}, 10, -2, 2);
  claims::refresh_population(net, x);
  // first BN: the moments of x·W_0ᵀ + b_0 over the 40 rows, by hand
  const std::vector<double> xv = x.to_vector(), w = net.params[0].to_vector(), b = net.params[1].to_vector();
  const std::vector<double> rm = net.running_mean[0].to_vector(), rv = net.running_var[0].to_vector();
  for (int c = 0; c < 5; ++c) {
    double s = 0, ss = 0;
    for (int i = 0; i < 40; ++i) {
      double z = b[c];
      for (int k = 0; k < 3; ++k) z += xv[i * 3 + k] * w[c * 3 + k];
      s += z;
      ss += z * z;
    }
    const double m = s / 40, var = ss / 40 - m * m;
    CHECK(rm[c] == Approx(m).epsilon(1e-12).margin(1e-14));
    CHECK(rv[c] == Approx(var).epsilon(1e-10));
  }
  claims::HessianNet bn = tiny_net(claims::HessianArm::bn);
  CHECK_THROWS_WITH(claims::refresh_population(bn, x), "refresh_population: only the bn-population arm has population statistics");
  CHECK_THROWS_WITH(claims::hessian_arm("batchnorm"), "--arms: expected plain, bn or bn-population, got batchnorm");
}

TEST_CASE("run_hessian: every arm on the chapter MLP, the same bits for 1 and 2 threads", "[hessian_bn]") {
  claims::HessianOptions o = claims::quick_hessian_options({});
  o.nets = {"chapter"};
  o.arms = {"plain", "bn", "bn-population"};
  o.steps = {0, 10};
  const claims::HessianResult one = run_hessian_1_and_2_threads(o);
  REQUIRE(one.points.size() == 6);
  // 50-32-16-1: 2,177 parameters; BN adds γ and β per hidden unit
  CHECK(one.points[0].params == 2177);
  CHECK(one.points[2].params == 2177 + 2 * (32 + 16));
  CHECK(one.points[4].params == 2177 + 2 * (32 + 16));
  for (const auto& p : one.points) {
    INFO(p.arm << " step " << p.step);
    CHECK(std::isfinite(p.loss));
    CHECK(p.probe.lambda_max > 0);
  }
  const std::string summary = claims::hessian_summary(one);
  CHECK_THAT(summary, Catch::Contains("Finding 1, BN half"));
  CHECK_THAT(summary, Catch::Contains("Finding 3 (population-statistics BN brings the outliers back)"));
  CHECK_THAT(summary, Catch::Contains("Santurkar et al. (BN gives a smaller lambda_max)"));
}
