// C38: SyncBatchNorm over 3 ranks with unequal batches (3, 1 and 2 rows; the rank with one row
// has one value per channel): statistics of the concatenated batch, normalising with the biased
// variance over the global count m = 6, running_var from the unbiased variance over m - 1 = 5
// (not each rank's n - 1, not a plain average of the ranks' means), num_batches_tracked 1,
// grad_input of BatchNorm on the concatenation, each rank's own weight/bias gradient
// (sum over its rows of dy*xhat and dy), and eval with the running stats.
// Sources: pytorch/pytorch#22192 (running_var wrong when the per-GPU input sizes differ);
// pytorch/pytorch#36865 and NVIDIA/apex#262 (a rank with one value per channel must not be
// rejected when the global count is > 1); PaddlePaddle/Paddle#32464 (plain average of the
// per-card statistics with unequal batch sizes).
// Expected values: PyTorch 1.13 float64.
// Runs as 3 MPI ranks (relaunches itself with mpirun when started alone).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>

#include "probe_harness.h"
#include "probe_mpi.h"

using namespace tapegrad;
namespace dist = tapegrad::distributed;
using probe::check;
using probe::verdict;

static std::vector<double> slice(const std::vector<double>& v, std::size_t row0, std::size_t rows, std::size_t cols) {
  return std::vector<double>(v.begin() + row0 * cols, v.begin() + (row0 + rows) * cols);
}

int main(int argc, char** argv) {
  if (!dist::launched_by_mpirun()) return probe::relaunch_under_mpirun(argv[0]);
  dist::Environment env(&argc, &argv);
  if (!probe::three_ranks(env, "C38")) return 1;
  const int r = env.rank();
  // rows of the concatenated batch: rank 0 rows 0-2, rank 1 row 3, rank 2 rows 4-5
  const std::vector<double> x_all = {-1.5, 1.0, 0.0, -1.0, 1.5, 0.5, 4.0, -3.0, 0.5, 2.5, -1.5, 1.0};
  const std::vector<double> g_all = {1.0, 0.5, -1.0, 2.0, 0.25, -0.5, 2.0, -1.0, -0.5, 1.5, 1.0, 0.0};
  const std::vector<double> out_all = {-3.113079226700912, 0.4883652572594781, -1.528269806675228,
                                       -0.08371136016326933, 0.0565396133504561, 0.3453461029037912,
                                       2.6978886467265966, -0.6557879775860167, -1.0, 0.9174227203265386,
                                       -3.113079226700912, 0.4883652572594781};
  const std::vector<double> gin_all = {0.9408515922657754, -0.03575459356344042, -1.4486471107108454,
                                       0.5363215557981519, -0.4043920702984842, -0.28603823070118123,
                                       0.9838531259386328, -0.17877468404143754, -1.0125171294608537,
                                       0.14301970042703446, 0.9408515922657754, -0.17877374791912726};
  const std::vector<std::vector<double>> gw_local = {{-0.660337258344035, -1.1918262862973903},
                                                     {3.6978886467265966, 1.8115759551720332},
                                                     {-1.056539613350456, 2.002268160979616}};
  const std::vector<std::vector<double>> gb_local = {{0.25, 2.0}, {2.0, -1.0}, {0.5, 1.5}};
  const std::size_t row0[3] = {0, 3, 4}, rows[3] = {3, 1, 2};
  const std::string who = "rank " + std::to_string(r) + " (" + std::to_string(rows[r]) + " rows) ";

  for (Dtype dt : {Dtype::Float64, Dtype::Float32}) {
    const std::string dn = who + (dt == Dtype::Float64 ? "float64 " : "float32 ");
    const double tol = dt == Dtype::Float64 ? 1e-9 : 2e-5;
    layers::BatchNormOptions o;
    o.momentum = 0.1;
    o.dtype = dt;
    dist::SyncBatchNorm bn(2, o);
    {
      NoGradGuard ng;
      bn.weight.copy_(Tensor::from_vector({2.0, 0.5}, {2}, dt));
      bn.bias.copy_(Tensor::from_vector({-1.0, 0.25}, {2}, dt));
    }
    bn.train();
    try {
      Tensor x = Tensor::from_vector(slice(x_all, row0[r], rows[r], 2), {(std::int64_t)rows[r], 2}, dt);
      x.requires_grad_();
      Tensor y = bn.forward(x);
      check(dn + "train output = BatchNorm of the concatenated 6 rows", y.to_vector(), slice(out_all, row0[r], rows[r], 2),
            tol);
      y.backward(Tensor::from_vector(slice(g_all, row0[r], rows[r], 2), {(std::int64_t)rows[r], 2}, dt));
      check(dn + "grad_input = BatchNorm backward on the concatenation", x.grad().to_vector(),
            slice(gin_all, row0[r], rows[r], 2), tol);
      check(dn + "grad_weight = this rank's sum of dy*xhat", bn.weight.grad().to_vector(), gw_local[r], tol);
      check(dn + "grad_bias = this rank's sum of dy", bn.bias.grad().to_vector(), gb_local[r], tol);
      check(dn + "running_mean (global mean [0.5, 0.1667] * 0.1)", bn.running_mean.to_vector(),
            {0.05, 0.016666666666666666}, tol);
      check(dn + "running_var (unbiased over m-1 = 5: [4.3, 3.6667])", bn.running_var.to_vector(),
            {1.33, 1.2666666666666666}, tol);
      verdict(bn.batches_tracked() == 1, dn + "num_batches_tracked = 1");
    } catch (const std::exception& e) {
      probe::threw(dn + "train step", e);
    }
    bn.eval();
    try {
      Tensor y = bn.forward(Tensor::from_vector({1.0, -1.0, 3.0, 2.0}, {2, 2}, dt));
      check(dn + "eval output uses the running stats",
            y.to_vector(), {0.6475027484881148, -0.2016642364096831, 4.115929587410462, 1.131115477586103}, tol);
    } catch (const std::exception& e) {
      probe::threw(dn + "eval", e);
    }
  }
  return probe::finish("C38 rank " + std::to_string(r));
}
