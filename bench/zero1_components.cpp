// What optimizer sharding (ZeRO-1) could save on a model, measured by its parts on this
// machine before building it. Run under MPI with 2 ranks:
//   mpirun -np 2 build/bench/zero1_components [reps]     (default 400)
// Model: the Fashion-MNIST MLP (784-256-128-10, BatchNorm, float32: 235,146 parameters).
// Per step, DDP today: one allreduce of every gradient (in place), a division by the world
// size over every element, Adam over every parameter. ZeRO-1 (element-granular halves of
// the flat gradient): a reduce-scatter (each rank receives the sum of its half), the
// division and Adam over its half, an allgather of the updated halves. Prints, per part, the
// median over reps of the slowest rank's wall and of this rank's thread CPU milliseconds, and
// the difference of the two schemes: a saving below ~0.05 ms per step (2-3 % of a rank's
// step) does not pay for the code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <vector>

#include <tapegrad/core/parallel.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall_ms, cpu_ms, cpu1_ms;  // slowest rank's wall; rank 0's and rank 1's CPU
};

// Median over reps of (slowest rank's wall, this rank's CPU) of `f`, each call after a barrier.
Timing time_part(const std::function<void()>& f, int reps) {
  std::vector<double> w, c;
  for (int i = 0; i < reps + 20; ++i) {
    dist::barrier();
    const double t0 = now(), c0 = thread_cpu();
    f();
    double dt = now() - t0;
    const double dc = thread_cpu() - c0;
    std::vector<double> all(static_cast<std::size_t>(dist::world_size()));
    dist::allgather(&dt, 1, all.data());
    if (i < 20) continue;
    w.push_back(*std::max_element(all.begin(), all.end()));
    c.push_back(dc);
  }
  std::sort(w.begin(), w.end());
  std::sort(c.begin(), c.end());
  double mine = c[c.size() / 2], both[2] = {0, 0};
  dist::allgather(&mine, 1, both);
  return {1e3 * w[w.size() / 2], 1e3 * both[0], 1e3 * both[1]};
}

void scale(float* p, std::size_t n, float f) {
  for (std::size_t j = 0; j < n; ++j) p[j] = p[j] * f;
}

}  // namespace

int main(int argc, char** argv) {
  dist::Environment env(&argc, &argv);
  return dist::run_guarded([&] {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 400;
    set_num_threads(1);  // one thread per rank, as the scaling runs
    const int R = dist::world_size();
    if (R != 2) throw std::runtime_error("zero1_components: run with mpirun -np 2");
    Generator gen(1);
    models::MLPOptions o;
    o.norm = models::Norm::Batch;
    models::MLP mlp({784, 256, 128, 10}, o, gen);
    std::vector<Tensor> params = mlp.parameters();
    std::size_t N = 0;
    for (auto& p : params) {
      p.set_grad(Tensor::full(p.shape(), 1e-3, p.dtype()));
      N += static_cast<std::size_t>(p.numel());
    }
    // this rank's element-granular half: the same parameters cut where the flat order is
    // halved (rank 0 gets the first N/2 elements), as 1-D tensors with their own gradients
    std::vector<Tensor> half;
    {
      const std::size_t lo = dist::rank() == 0 ? 0 : N / 2, hi = dist::rank() == 0 ? N / 2 : N;
      std::size_t off = 0;
      for (auto& p : params) {
        const std::size_t n = static_cast<std::size_t>(p.numel());
        const std::size_t a = std::max(lo, off), b = std::min(hi, off + n);
        if (a < b) {
          Tensor t = Tensor::zeros({static_cast<std::int64_t>(b - a)}, p.dtype()).requires_grad_();
          t.set_grad(Tensor::full(t.shape(), 1e-3, t.dtype()));
          half.push_back(t);
        }
        off += n;
      }
    }
    optim::Adam full_opt(params, {.lr = 1e-3});
    optim::Adam half_opt(half, {.lr = 1e-3});
    std::vector<float> flat(N, 1.0f), part(N / 2 + 1, 0.0f);
    MPI_Comm comm = dist::detail::dup_world();
    const int n_half = static_cast<int>(N / 2);
    auto wait = [](MPI_Request& r) { dist::detail::wait(r, "bench"); };

    const Timing allreduce = time_part(
        [&] {
          MPI_Request r;
          MPI_Iallreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(N), MPI_FLOAT, MPI_SUM, comm, &r);
          wait(r);
        },
        reps);
    const Timing divide_all = time_part([&] { scale(flat.data(), N, 0.5f); }, reps);
    const Timing adam_all = time_part([&] { full_opt.step(); }, reps);
    const Timing reduce_scatter = time_part(
        [&] {
          MPI_Request r;
          MPI_Ireduce_scatter_block(flat.data(), part.data(), n_half, MPI_FLOAT, MPI_SUM, comm, &r);
          wait(r);
        },
        reps);
    const Timing divide_half = time_part([&] { scale(part.data(), N / 2, 0.5f); }, reps);
    const Timing adam_half = time_part([&] { half_opt.step(); }, reps);
    const Timing allgather = time_part(
        [&] {
          MPI_Request r;
          MPI_Iallgather(part.data(), n_half, MPI_FLOAT, flat.data(), n_half, MPI_FLOAT, comm, &r);
          wait(r);
        },
        reps);
    MPI_Comm_free(&comm);
    if (dist::rank() == 0) {
      std::printf("zero1_components: %zu float32 parameters (%zu tensors; a half: %zu tensors), 2 ranks, %d reps,\n"
                  "median ms per step, slowest rank's wall / this rank's CPU (rank 0 and 1)\n",
                  N, params.size(), half.size(), reps);
      auto row = [](const char* name, Timing t) {
        std::printf("  %-34s %7.3f / %7.3f %7.3f\n", name, t.wall_ms, t.cpu_ms, t.cpu1_ms);
      };
      row("DDP: allreduce (in place)", allreduce);
      row("DDP: divide every element", divide_all);
      row("DDP: Adam over every parameter", adam_all);
      row("ZeRO-1: reduce-scatter", reduce_scatter);
      row("ZeRO-1: divide a half", divide_half);
      row("ZeRO-1: Adam over a half", adam_half);
      row("ZeRO-1: allgather of the halves", allgather);
      const double ddp_w = allreduce.wall_ms + divide_all.wall_ms + adam_all.wall_ms;
      const double z_w = reduce_scatter.wall_ms + divide_half.wall_ms + adam_half.wall_ms + allgather.wall_ms;
      auto cpu = [](Timing t) { return std::max(t.cpu_ms, t.cpu1_ms); };  // the busier rank
      const double ddp_c = cpu(allreduce) + cpu(divide_all) + cpu(adam_all);
      const double z_c = cpu(reduce_scatter) + cpu(divide_half) + cpu(adam_half) + cpu(allgather);
      std::printf("  total: DDP %.3f / %.3f, ZeRO-1 %.3f / %.3f: ZeRO-1 saves %.3f ms wall, %.3f ms CPU (busier rank) per step\n",
                  ddp_w, ddp_c, z_w, z_c, ddp_w - z_w, ddp_c - z_c);
    }
    return 0;
  });
}
