// norm_study: ghost batches against separate replicas (the in-process stand-in for the MPI
// equality test), byte-identical CSVs for any --threads, gnuplot quoting.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cmath>

#include <spdlog/spdlog.h>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/debug/buffers.h>
#include "batch_size.h"
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include "kit/ghost_batch.h"
#include "test_data.h"
#include "kit/gnuplot.h"
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>

using namespace normstudy;
using namespace tapegrad;

namespace {

using normstudy::testing::random_x;
using normstudy::testing::random_y;
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector(), vb = b.to_vector();
  REQUIRE(va.size() == vb.size());
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

struct Compare {
  double params = 0, buffers = 0, losses = 0, params_vs_sync = 0;
};

// Trains a GhostBatchNorm net (R replicas of m rows) and R separate nets run as DDP would
// (rank 0's buffers broadcast before every forward, gradients averaged, one SGD step
// each) for `steps` steps in float64, and a net whose BN sees the whole R·m batch.
// arch "cnn": 1×6×6 images, Conv(2) → Conv(4) → Linear(8), so the per-replica norms are
// BatchNorm2d / BatchRenorm2d on (m, C, H, W) and BatchNorm1d / BatchRenorm1d in the head.
Compare ghost_vs_replicas(NormKind kind, int R, std::int64_t m, int steps, const std::string& arch = "mlp") {
  const std::int64_t D = arch == "cnn" ? 36 : 10, C = 5;
  ModelConfig mc;
  mc.arch = arch;
  mc.norm = kind;
  mc.replicas = R;
  mc.hidden = {16, 8};
  mc.image = {1, 6, 6};
  mc.channels = {2, 4};
  mc.head = 8;
  mc.dtype = Dtype::Float64;
  mc.groups = arch == "cnn" ? 2 : 4;
  Generator g0(11);
  Model ghost = build_model(mc, D, C, g0);
  ModelConfig sc = mc;
  sc.norm = NormKind::Sync;
  Generator gs(11);
  Model sync = build_model(sc, D, C, gs);
  ModelConfig rc = mc;
  rc.replicas = 1;
  std::vector<Model> reps;
  for (int r = 0; r < R; ++r) {
    Generator g(11);
    reps.push_back(build_model(rc, D, C, g));
  }
  optim::SGDOptions so;
  so.lr = 0.1;
  so.momentum = 0.9;
  optim::SGD opt_ghost(ghost.net->parameters(), so), opt_sync(sync.net->parameters(), so);
  std::vector<std::unique_ptr<optim::SGD>> opt_reps;
  for (auto& r : reps) opt_reps.push_back(std::make_unique<optim::SGD>(r.net->parameters(), so));
  Generator data(5);
  Compare c;
  for (int step = 0; step < steps; ++step) {
    const Tensor X = random_x(data, R * m, D), y = random_y(data, R * m, C);
    renorm_schedule(ghost, step + 1, 2);  // rmax 3, dmax 5 from the first step on
    for (auto& r : reps) renorm_schedule(r, step + 1, 2);
    const double loss_ghost = train_step(*ghost.net, opt_ghost, X, y);
    train_step(*sync.net, opt_sync, X, y);
    // The replicas.
    double loss_sum = 0;
    const auto start = debug::snapshot_buffers(*reps[0].net);
    for (int r = 0; r < R; ++r) {
      if (r > 0) debug::restore_buffers(*reps[static_cast<std::size_t>(r)].net, start);  // broadcast_buffers
      auto& net = *reps[static_cast<std::size_t>(r)].net;
      net.zero_grad();
      Tensor loss = layers::cross_entropy(net(narrow(X, 0, r * m, m)), narrow(y, 0, r * m, m));
      loss.backward();
      loss_sum += loss.item();
    }
    const auto p0 = reps[0].net->parameters();
    for (std::size_t i = 0; i < p0.size(); ++i) {
      Tensor avg = Tensor::zeros(p0[i].shape(), Dtype::Float64);
      for (auto& r : reps) avg.add_(r.net->parameters()[i].grad(), 1.0 / R);  // allreduce / R
      for (auto& r : reps) r.net->parameters()[i].set_grad(avg.clone());
    }
    for (auto& o : opt_reps) o->step();
    c.losses = std::max(c.losses, std::fabs(loss_ghost - loss_sum / R));
  }
  const auto pg = ghost.net->parameters(), ps = sync.net->parameters();
  for (int r = 0; r < R; ++r) {
    const auto pr = reps[static_cast<std::size_t>(r)].net->parameters();
    for (std::size_t i = 0; i < pg.size(); ++i) c.params = std::max(c.params, max_abs_diff(pg[i], pr[i]));
  }
  for (std::size_t i = 0; i < pg.size(); ++i) c.params_vs_sync = std::max(c.params_vs_sync, max_abs_diff(pg[i], ps[i]));
  const auto bg = ghost.net->buffers(), b0 = reps[0].net->buffers();
  REQUIRE(bg.size() == b0.size());
  for (std::size_t i = 0; i < bg.size(); ++i) c.buffers = std::max(c.buffers, max_abs_diff(bg[i], b0[i]));
  return c;
}

}  // namespace

TEST_CASE("ghost batches equal R separate replicas with averaged gradients (float64)", "[norm_study][ghost]") {
  for (NormKind kind : {NormKind::Batch, NormKind::Renorm}) {
    INFO(kind_name(kind));
    const Compare c = ghost_vs_replicas(kind, 3, 4, 6);
    CHECK(c.params < 1e-12);
    CHECK(c.buffers < 1e-12);
    CHECK(c.losses < 1e-12);
    // Per-replica statistics are not the whole batch's: the sync net ends elsewhere.
    CHECK(c.params_vs_sync > 1e-4);
  }
}

TEST_CASE("ghost batches on (N, C, H, W) equal R separate CNN replicas with averaged gradients (float64)",
          "[norm_study][ghost]") {
  for (NormKind kind : {NormKind::Batch, NormKind::Renorm}) {
    INFO(kind_name(kind));
    const Compare c = ghost_vs_replicas(kind, 3, 4, 6, "cnn");
    CHECK(c.params < 1e-12);
    CHECK(c.buffers < 1e-12);
    CHECK(c.losses < 1e-12);
    CHECK(c.params_vs_sync > 1e-4);
  }
  // The net: Unflatten, two conv blocks with a per-replica BatchNorm2d each, a BatchNorm1d head.
  ModelConfig mc;
  mc.arch = "cnn";
  mc.replicas = 2;
  mc.image = {1, 6, 6};
  mc.channels = {2, 4};
  mc.head = 8;
  Generator g(1);
  const Model model = build_model(mc, 36, 5, g);
  REQUIRE(model.bns.size() == 3);
  CHECK(model.bns[0]->type_name() == "BatchNorm2d");
  CHECK(model.bns[2]->type_name() == "BatchNorm1d");
  CHECK_THROWS_WITH(build_model(mc, 35, 5, g), Catch::Contains("got 35 features"));
  mc.norm = NormKind::Group;
  mc.groups = 3;
  CHECK_THROWS_WITH(build_model(mc, 36, 5, g), Catch::Contains("width 2 is not divisible by 3 groups"));
}

TEST_CASE("ghost batches with R = 1 are the wrapped BatchNorm", "[norm_study][ghost]") {
  const Compare c = ghost_vs_replicas(NormKind::Batch, 1, 8, 4);
  CHECK(c.params < 1e-13);
  CHECK(c.params_vs_sync == 0.0);
}

TEST_CASE("GhostBatchNorm keeps replica 0's running statistics and refuses uneven batches", "[norm_study][ghost]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  auto bn = std::make_shared<layers::BatchNorm1d>(3, layers::BatchNormOptions{.dtype = Dtype::Float64});
  GhostBatchNorm ghost(bn, 2);
  Generator g(3);
  const Tensor x = random_x(g, 8, 3);
  ghost(x);
  layers::BatchNorm1d ref(3, layers::BatchNormOptions{.dtype = Dtype::Float64});
  ref(narrow(x, 0, 0, 4));
  CHECK(max_abs_diff(bn->running_mean, ref.running_mean) < 1e-15);
  CHECK(max_abs_diff(bn->running_var, ref.running_var) < 1e-15);
  CHECK(bn->batches_tracked() == 1);
  CHECK_THROWS_WITH(ghost(random_x(g, 7, 3)), Catch::Contains("2 equal replica batches, got 7 rows"));
  CHECK_THROWS_WITH(GhostBatchNorm(bn, 0), Catch::Contains("replicas must be >= 1, got 0"));
  // Eval mode: the whole batch with running statistics, row by row the same as alone.
  ghost.eval();
  const Tensor all = ghost(x), one = ghost(narrow(x, 0, 5, 1));
  CHECK(max_abs_diff(narrow(all, 0, 5, 1), one) < 1e-15);
}

TEST_CASE("GhostBatchNorm on (N, C, H, W) normalises each replica's rows with their own statistics",
          "[norm_study][ghost]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards whose graphs never reach a backward, on purpose
  auto bn = std::make_shared<layers::BatchNorm2d>(3, layers::BatchNormOptions{.dtype = Dtype::Float64});
  GhostBatchNorm ghost(bn, 2);
  Generator g(4);
  const Tensor x = reshape(random_x(g, 6, 3 * 2 * 2), {6, 3, 2, 2});
  const Tensor y = ghost(x);
  CHECK(y.shape() == x.shape());
  for (int r = 0; r < 2; ++r) {
    layers::BatchNorm2d ref(3, layers::BatchNormOptions{.dtype = Dtype::Float64});
    const Tensor part = narrow(x, 0, 3 * r, 3);
    CHECK(max_abs_diff(narrow(y, 0, 3 * r, 3), ref(part)) < 1e-14);
    if (r == 0) {  // replica 0's running statistics are kept
      CHECK(max_abs_diff(bn->running_mean, ref.running_mean) < 1e-15);
      CHECK(max_abs_diff(bn->running_var, ref.running_var) < 1e-15);
    }
  }
  // By hand: replica 1's channel 0 (β = 0) sums to 0 over its (m, H, W).
  const auto v = narrow(y, 0, 3, 3).to_vector();
  double s = 0;
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 4; ++k) s += v[static_cast<std::size_t>(n * 12 + k)];
  CHECK(std::fabs(s) < 1e-12);
  CHECK(bn->batches_tracked() == 1);
  CHECK_THROWS_WITH(ghost(reshape(random_x(g, 5, 12), {5, 3, 2, 2})), Catch::Contains("got 5 rows"));
}

TEST_CASE("batch-size CSV is byte-identical for any --threads", "[norm_study][determinism]") {
  spdlog::set_level(spdlog::level::warn);
  Generator g(9);
  StudyData d;
  const std::int64_t n = 256, D = 20;
  d.train = data::Dataset::make(random_x(g, n, D).to(Dtype::Float32), random_y(g, n, 10));
  d.test = data::Dataset::make(random_x(g, 100, D).to(Dtype::Float32), random_y(g, 100, 10));
  BatchSizeOptions o;
  o.ms = {2, 8};
  o.replicas = 2;
  o.seeds = 2;
  o.epochs = 1;
  o.train_size = n;
  o.hidden = {32, 32};
  o.threads = 1;
  const std::string one = batch_size_csv(run_batch_size(o, d));
  o.threads = 2;
  const std::string two = batch_size_csv(run_batch_size(o, d));
  CHECK(one == two);
  // header + 6 norms × 2 m × 2 seeds
  CHECK(std::count(one.begin(), one.end(), '\n') == 1 + 6 * 2 * 2);
  CHECK(one.find("nan") == std::string::npos);
}

TEST_CASE("batch-size refuses no m and a global batch R·m that overflows, naming the values", "[norm_study][errors]") {
  Generator g(9);
  StudyData d;
  d.train = data::Dataset::make(random_x(g, 16, 4).to(Dtype::Float32), random_y(g, 16, 10));
  d.test = d.train;
  BatchSizeOptions o;
  o.hidden = {4};
  o.groups = 4;
  o.replicas = 2;
  o.ms = {};
  CHECK_THROWS_WITH(run_batch_size(o, d), "--ms: expected at least one per-replica batch size, got none");
  o.ms = {std::int64_t{1} << 62};  // 2·2^62 wraps to a negative global batch
  CHECK_THROWS_WITH(check_batch_size_options(o),
                    "--ms/--replicas: global batch 2·4611686018427387904 exceeds --train-size 20000");
  // within --train-size (checked before the data is read) but past the images of the data
  o.ms = {9};
  CHECK_THROWS_WITH(run_batch_size(o, d), "--ms/--replicas: global batch 2·9 exceeds the 16 training images");
}

TEST_CASE("gnuplot_quote doubles single quotes and refuses newlines", "[norm_study][report]") {
  CHECK(studies::kit::gnuplot_quote("/tmp/a b/x.png") == "'/tmp/a b/x.png'");
  CHECK(studies::kit::gnuplot_quote("it's; rm -rf $HOME") == "'it''s; rm -rf $HOME'");
  CHECK_THROWS_WITH(studies::kit::gnuplot_quote("a\nb"), Catch::Contains("newline"));
}

TEST_CASE("norm_study build_model names widths whose parameters do not fit in memory and not std::bad_alloc", "[norm_study]") {
  Generator g(0);
  // build_model's std::runtime_error message ("" when it builds or throws anything else)
  auto refusal = [&](const ModelConfig& c) -> std::string {
    try {
      build_model(c, 784, 10, g);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  ModelConfig cnn;
  cnn.arch = "cnn";
  cnn.channels = {99999999999};  // a 99999999999 x 1 x 3 x 3 kernel: no allocator holds it
  CHECK_THAT(refusal(cnn), Catch::Matchers::Contains(
                      "cnn: out of memory allocating the parameters of --channels 99999999999 --head 64; use smaller widths"));
  ModelConfig mlp;
  mlp.hidden = {1000000000000};
  CHECK_THAT(refusal(mlp), Catch::Matchers::Contains(
                      "mlp: out of memory allocating the parameters of hidden widths 1000000000000; use smaller widths"));
}
