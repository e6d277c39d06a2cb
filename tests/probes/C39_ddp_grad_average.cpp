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
#include <cstdlib>
#include <memory>
#include <sys/wait.h>
#include <spawn.h>
#include <sstream>
#include <unistd.h>

extern char** environ;

#include <tapegrad/core/core.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;
static int g_fail = 0;

static void check(const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                  double tol) {
  bool ok = got.size() == want.size();
  double worst = 0;
  for (std::size_t i = 0; ok && i < got.size(); ++i) {
    const double d = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!std::isfinite(got[i]) || !(d <= tol)) ok = false;
    if (std::isfinite(d)) worst = std::max(worst, d);
  }
  std::printf("%s %s (max err %.3g, tol %.0e)\n", ok ? "PASS" : "FAIL", what.c_str(), worst, tol);
  if (!ok) {
    ++g_fail;
    std::printf("   got :");
    for (double v : got) std::printf(" %.12g", v);
    std::printf("\n   want:");
    for (double v : want) std::printf(" %.12g", v);
    std::printf("\n");
  }
}

static void verdict(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++g_fail;
}

// Without an MPI launcher the probe starts itself under `mpirun -np 3` and returns its status
// (so a plain ./C3x works like the other probes). MPIRUN overrides the launcher command
// (split on spaces; no shell is involved).
static int relaunch(const char* self) {
  const char* env = std::getenv("MPIRUN");
  std::vector<std::string> words;
  std::istringstream launcher(env ? env : "mpirun --allow-run-as-root --oversubscribe");
  for (std::string w; launcher >> w;) words.push_back(w);
  if (words.empty()) return 99;
  words.insert(words.end(), {"-np", "3", self});
  std::vector<char*> args;
  for (auto& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  std::printf("launching: %s -np 3 %s\n", words.front().c_str(), self);
  std::fflush(stdout);
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return 99;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return 99;
  return WEXITSTATUS(status);
}

int main(int argc, char** argv) {
  if (!dist::launched_by_mpirun()) return relaunch(argv[0]);
  dist::Environment env(&argc, &argv);
  const int r = env.rank();
  if (env.world_size() != 3) {
    std::printf("FAIL C39 needs 3 ranks, got %d\n", env.world_size());
    return 1;
  }
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
      ++g_fail;
      std::printf("FAIL %sthrew: %s\n", dn.c_str(), e.what());
    }
  }
  std::printf("C39 rank %d: %d failure(s)\n", r, g_fail);
  return g_fail;
}
