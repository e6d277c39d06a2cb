// The MLP probes (ics-mlp, landscape-mlp) leave training unchanged and their CSV does not
// depend on the thread count; the ICS probe of an MLP whose earlier layers cannot move is zero.
#include <catch2/catch.hpp>

#include <cmath>

#include "mlp_probes.h"
#include <tapegrad/core/ops.h>

using namespace tapegrad;

namespace {
normstudy::StudyData synthetic(std::int64_t n, std::int64_t features) {
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
