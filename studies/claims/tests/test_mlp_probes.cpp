// The MLP probes (ics-mlp, landscape-mlp) leave training unchanged and their CSV does not
// depend on the thread count; the ICS probe of an MLP whose earlier layers cannot move is zero.
#include <catch2/catch.hpp>

#include <cmath>

#include "mlp_probes.h"
#include <tapegrad/core/ops.h>

using namespace tapegrad;

namespace {
studies::kit::StudyData synthetic(std::int64_t n, std::int64_t features) {
  Generator g(3);
  const Tensor X = randn({n, features}, Dtype::Float32, g);
  std::vector<double> y(n);
  const auto xv = X.to_vector();
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<double>(((xv[i * features] > 0) + 2 * (xv[i * features + 1] > 0)));
  const Tensor Y = Tensor::from_vector(y, {n}, Dtype::Int64);
  return {data::Dataset::make(X, Y), data::Dataset::make(X, Y)};
}
}  // namespace

TEST_CASE("MLP probes change nothing and the CSV does not depend on threads", "[claims][mlp_probes]") {
  const auto d = synthetic(256, 12);
  claims::MlpProbeOptions o;
  o.seeds = 2;
  o.epochs = 2;
  o.batch = 32;
  o.train_size = 256;
  o.hidden = {16, 8};
  o.every = 3;
  o.grid = 3;
  o.threads = 1;
  const auto bare = claims::run_mlp_probes(o, d, false, false);
  const auto probed = claims::run_mlp_probes(o, d, true, true);
  REQUIRE(bare.runs.size() == 4);
  for (std::size_t k = 0; k < bare.runs.size(); ++k) {
    REQUIRE(bare.runs[k].loss.size() == 6);  // steps 0, 3, ..., 15 (16 steps: 15 is the last)
    CHECK(bare.runs[k].loss == probed.runs[k].loss);
    REQUIRE(probed.runs[k].ics.size() == 6);
    CHECK(probed.runs[k].ics[0].l2.size() == 2);  // Linear 2 and 3
    for (const auto& p : probed.runs[k].ics)
      for (double c : p.cos) CHECK((c > -1.0001 && c < 1.0001));
    for (const auto& p : probed.runs[k].landscape) {
      CHECK(p.loss_min <= p.loss_max);
      CHECK(p.beta > 0);
    }
  }
  o.threads = 2;
  const auto two = claims::run_mlp_probes(o, d, true, true);
  CHECK(claims::ics_csv(two) == claims::ics_csv(probed));
  CHECK(claims::landscape_csv(two) == claims::landscape_csv(probed));
}

TEST_CASE("build_mlp + train_mlp train every BN's gamma and apply the weight scale", "[claims][mlp]") {
  const auto d = synthetic(256, 12);
  claims::MlpSpec spec;
  spec.hidden = {16, 8};
  spec.bn = true;
  Generator init(1);
  claims::Mlp m = claims::build_mlp(spec, 12, 4, init);
  REQUIRE(m.bns.size() == 2);
  claims::TrainSpec t;
  t.epochs = 3;
  t.batch = 32;
  t.lr = 0.1;
  const auto out = claims::train_mlp(m, t, d);
  CHECK_FALSE(out.crashed);
  CHECK(out.train_acc > 0.5);  // four classes from the signs of two features
  for (const auto& b : m.bns) {
    double moved = 0;
    for (double g : b->weight.to_vector()) moved = std::max(moved, std::fabs(g - 1));
    CHECK(moved > 1e-3);
  }
  claims::MlpSpec big;
  big.hidden = {4000};
  big.weight_scale = 3;
  Generator g2(2);
  const auto m2 = claims::build_mlp(big, 50, 2, g2);
  double s2 = 0;
  const auto w = m2.linears[0]->weight.to_vector();
  for (double v : w) s2 += v * v;
  CHECK(std::sqrt(s2 / w.size()) == Approx(3 * std::sqrt(2.0 / 50)).epsilon(0.02));
  for (double v : m2.linears[0]->bias.to_vector()) CHECK(v == 0);
}
