// SyncBatchNorm's forward + backward against BatchNorm's on the same per-rank input, side by
// side in one run (the ratio is the figure). Run under MPI:
//   mpirun -np 2 build/bench/sync_batch_norm_bench [N C [reps [threads]]]  (default 256 512 400 1)
// Each timed call is forward (train mode) + backward with a given dy, float32, after a
// barrier, so every rank times the same step; the median over reps of the slowest rank's
// time is reported. The SyncBatchNorm extra is its two collectives (an allgather of
// 2C+1 doubles forward, an allreduce of 2C doubles backward) plus its own loops.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median over reps of max-over-ranks seconds of one forward + backward of `m`.
double time_module(layers::Module& m, const Tensor& x0, const Tensor& gy, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps + 20; ++i) {
    Tensor x = x0.detach().requires_grad_();
    dist::barrier();
    const double t0 = now();
    Tensor y = m(x);
    y.backward(gy);
    double dt = now() - t0;
    // slowest rank's time (a collective, outside the timed region)
    std::vector<double> all(static_cast<std::size_t>(dist::world_size()));
    dist::allgather(&dt, 1, all.data());
    if (i >= 20) t.push_back(*std::max_element(all.begin(), all.end()));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  dist::Environment env(&argc, &argv);
  return dist::run_guarded([&] {
    const std::int64_t N = argc > 2 ? std::atoll(argv[1]) : 256, C = argc > 2 ? std::atoll(argv[2]) : 512;
    const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 400;
    set_num_threads(argc > 4 ? std::max(1, std::atoi(argv[4])) : 1);  // threads per rank
    Generator gen(1 + static_cast<std::uint64_t>(env.rank()));
    Tensor x = randn({N, C}, Dtype::Float32, gen), gy = randn({N, C}, Dtype::Float32, gen);
    layers::BatchNorm1d bn(C);
    dist::SyncBatchNorm sbn(C);
    const double t_bn = time_module(bn, x, gy, reps);
    const double t_sbn = time_module(sbn, x, gy, reps);
    const double t_bn2 = time_module(bn, x, gy, reps);  // again, to see the drift of a shared machine
    if (env.rank() == 0)
      std::printf("ranks %d, threads/rank %d, per-rank input (%lld, %lld) float32, median of %d\n"
                  "BatchNorm1d     fwd+bwd %8.1f us (again: %.1f us)\n"
                  "SyncBatchNorm   fwd+bwd %8.1f us  = %.2fx BatchNorm, +%.1f us\n",
                  env.world_size(), get_num_threads(), static_cast<long long>(N), static_cast<long long>(C), reps,
                  1e6 * t_bn, 1e6 * t_bn2, 1e6 * t_sbn, t_sbn / std::min(t_bn, t_bn2),
                  1e6 * (t_sbn - std::min(t_bn, t_bn2)));
    return 0;
  });
}
