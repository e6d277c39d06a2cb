// Ghost batches (GhostBatchNorm, R virtual replicas in one process) against the real thing:
// R MPI ranks, each with plain BatchNorm on its m rows, under DistributedDataParallel
// (rank 0's buffers broadcast before every forward, gradients averaged). Run as
//   mpirun -np R norm_study_ghost_vs_ranks
// Every rank trains its replica; rank 0 also trains the ghost net on the whole R·m batch and
// the whole-batch BatchNorm net (SyncBatchNorm's statistics), and compares after every step
// (float64): parameters, buffers and the mean loss must agree to 1e-10 with the ranks, and
// the whole-batch net must end elsewhere (so the comparison can fail). Exit status 0 on
// success; an exception on any rank ends the job (run_guarded).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include "kit/ghost_batch.h"
#include "../test_data.h"
#include <tapegrad/layers/losses.h>
#include "kit/fashion_data.h"
#include "kit/jobs.h"
#include "kit/norm_net.h"
#include "kit/option_checks.h"
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;
using namespace studies::kit;

namespace {

using normstudy::testing::random_x;
using normstudy::testing::random_y;
double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) throw std::logic_error("tensor lists differ in length");
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto va = a[i].to_vector(), vb = b[i].to_vector();
    for (std::size_t k = 0; k < va.size(); ++k) m = std::max(m, std::fabs(va[k] - vb[k]));
  }
  return m;
}

int run() {
  const int R = distributed::world_size(), rank = distributed::rank();
  const std::int64_t m = 4, D = 10, C = 5;
  const int steps = 6;
  ModelConfig mc;
  mc.norm = NormKind::Batch;
  mc.hidden = {16, 8};
  mc.dtype = Dtype::Float64;
  mc.replicas = 1;
  Generator g(11);
  Model mine = build_model(mc, D, C, g);
  distributed::DDPOptions dopt;
  dopt.broadcast_buffers = true;
  distributed::DistributedDataParallel ddp(mine.net, dopt);
  optim::SGDOptions so;
  so.lr = 0.1;
  so.momentum = 0.9;
  optim::SGD opt(mine.net->parameters(), so);

  // Rank 0's references: ghost batches over R replicas, and BatchNorm over the whole batch.
  ModelConfig gc = mc;
  gc.replicas = R;
  Generator g1(11), g2(11);
  Model ghost = build_model(gc, D, C, g1);
  ModelConfig wc = mc;
  wc.norm = NormKind::Sync;
  wc.replicas = R;
  Model whole = build_model(wc, D, C, g2);
  optim::SGD opt_ghost(ghost.net->parameters(), so), opt_whole(whole.net->parameters(), so);

  Generator data(5);
  double worst_params = 0, worst_buffers = 0, worst_loss = 0;
  for (int step = 0; step < steps; ++step) {
    const Tensor X = random_x(data, R * m, D), y = random_y(data, R * m, C);  // the same on every rank
    mine.net->train();
    opt.zero_grad();
    Tensor loss = layers::cross_entropy(ddp(narrow(X, 0, rank * m, m)), narrow(y, 0, rank * m, m));
    loss.backward();
    ddp.finish();
    opt.step();
    const double my_loss = loss.item();
    std::vector<double> losses(static_cast<std::size_t>(R));
    distributed::allgather(&my_loss, 1, losses.data());
    double mean_loss = 0;
    for (double l : losses) mean_loss += l / R;
    if (rank != 0) continue;
    for (auto* ref : {&ghost, &whole}) {
      auto& o = ref == &ghost ? opt_ghost : opt_whole;
      ref->net->train();
      o.zero_grad();
      Tensor l = layers::cross_entropy((*ref->net)(X), y);
      l.backward();
      o.step();
      if (ref == &ghost) worst_loss = std::max(worst_loss, std::fabs(l.item() - mean_loss));
    }
    worst_params = std::max(worst_params, max_abs_diff(ghost.net->parameters(), mine.net->parameters()));
    worst_buffers = std::max(worst_buffers, max_abs_diff(ghost.net->buffers(), mine.net->buffers()));
  }
  if (rank != 0) return 0;
  const double whole_gap = max_abs_diff(whole.net->parameters(), mine.net->parameters());
  std::printf("ghost batches vs %d ranks x %lld rows, %d SGD steps (float64): parameters %.3g, buffers %.3g, "
              "loss %.3g; whole-batch BatchNorm vs ranks: parameters %.3g\n",
              R, static_cast<long long>(m), steps, worst_params, worst_buffers, worst_loss, whole_gap);
  const bool ok = worst_params < 1e-10 && worst_buffers < 1e-10 && worst_loss < 1e-10 && whole_gap > 1e-4;
  std::printf("%s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  distributed::Environment env(&argc, &argv);
  return distributed::run_guarded(run);
}
