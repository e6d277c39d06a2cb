// C39: DistributedDataParallel over 3 ranks: construction copies rank 0's parameters to every
// rank (the replicas start different here), and after backward + finish() every .grad is the
// plain average over ranks of the per-rank gradients, even with unequal shards (3, 1, 2 rows,
// MSE 'mean' per rank): not the gradient of the global-batch mean, not the sum. One SGD step
// then leaves identical replicas.
// Sources: pytorch/pytorch#37359 (DDP always averages over processes, which differs from local
// training when per-process batch sizes differ); pytorch/pytorch#67253 (different batch size
// per GPU); facebookresearch/fairseq#494 (undoing DDP's division by world size).
// Expected values: PyTorch 1.13 float64.
// Runs as 3 MPI ranks (relaunches itself with mpirun when started alone).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>
#include <memory>

#include <tapegrad/core/core.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>

#include "probe_harness.h"
#include "probe_mpi.h"

using namespace tapegrad;
namespace dist = tapegrad::distributed;
using probe::check;
using probe::verdict;

int main(int argc, char** argv) {
  if (!dist::launched_by_mpirun()) return probe::relaunch_under_mpirun(argv[0]);
  dist::Environment env(&argc, &argv);
  if (!probe::three_ranks(env, "C39")) return 1;
  const int r = env.rank();
  const std::vector<std::vector<double>> xs = {{-1.5, 0.5, -1.0, 1.0, -0.5, 1.5, 0.0, -1.5, 0.5},
                                               {1.0, 2.0, -1.0},
                                               {0.5, -0.5, 2.0, -2.0, 1.0, 0.0}};
  const std::vector<std::vector<double>> ts = {{-1.0, 0.5, -0.5, 1.0, 0.0, -1.0}, {0.5, -1.5}, {1.0, 0.0, -1.0, 2.0}};
  const std::int64_t rows[3] = {3, 1, 2};
  const std::vector<double> W0 = {0.5, -1.0, 0.25, 1.5, 0.75, -0.5}, b0 = {0.1, -0.2};
  const std::string who = "rank " + std::to_string(r) + " ";
  for (Dtype dt : {Dtype::Float64, Dtype::Float32}) {
    const std::string dn = who + (dt == Dtype::Float64 ? "float64 " : "float32 ");
    const double tol = dt == Dtype::Float64 ? 1e-12 : 2e-6;
    try {
      auto lin = std::make_shared<layers::Linear>(3, 2, true, dt);
      {
        NoGradGuard ng;  // rank 0 holds W0, b0; the others hold something else
        std::vector<double> w = W0, b = b0;
        if (r != 0)
          for (auto& v : w) v += 10.0 * r;
        if (r != 0) b = {-7.0, 7.0};
        lin->weight.copy_(Tensor::from_vector(w, {2, 3}, dt));
        lin->bias.copy_(Tensor::from_vector(b, {2}, dt));
      }
      dist::DistributedDataParallel ddp(lin);
      check(dn + "weight after construction = rank 0's", lin->weight.to_vector(), W0, tol);
      check(dn + "bias after construction = rank 0's", lin->bias.to_vector(), b0, tol);
      optim::SGDOptions so;
      so.lr = 0.1;
      optim::SGD opt(lin->parameters(), so);
      opt.zero_grad();
      Tensor x = Tensor::from_vector(xs[r], {rows[r], 3}, dt);
      Tensor t = Tensor::from_vector(ts[r], {rows[r], 2}, dt);
      Tensor loss = layers::mse_loss(ddp(x), t);
      loss.backward();
      ddp.finish();
      check(dn + "grad_weight = average over ranks (not global-batch mean [0.4, -1.525, ...], not sum)",
            lin->weight.grad().to_vector(),
            {-0.10138888888888886, -2.0319444444444446, 1.3027777777777778, 3.2687500000000003, 2.553472222222222,
             -1.8138888888888889},
            tol);
      check(dn + "grad_bias = average over ranks", lin->bias.grad().to_vector(),
            {-0.4416666666666666, 0.33472222222222214}, tol);
      opt.step();
      check(dn + "weight after SGD lr 0.1 (same on every rank)", lin->weight.to_vector(),
            {0.5101388888888889, -0.7968055555555555, 0.1197222222222222, 1.173125, 0.4946527777777778,
             -0.31861111111111107},
            tol);
      check(dn + "bias after SGD lr 0.1", lin->bias.to_vector(), {0.14416666666666667, -0.23347222222222222}, tol);
    } catch (const std::exception& e) {
      probe::threw(dn + "step", e);
    }
  }
  return probe::finish("C39 rank " + std::to_string(r));
}
