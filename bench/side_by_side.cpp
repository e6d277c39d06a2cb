// Same workloads in tapegrad and libtorch, in one process, alternating, at the same
// thread count; prints each median and the ratio libtorch/tapegrad (> 1: tapegrad faster).
//   side_by_side [--threads N] [--reps R] [--only SUBSTRING] [--clock wall|cpu]
//   side_by_side --peak tapegrad|libtorch     # peak RSS growth of two large-net steps
#include <sys/resource.h>
#include <time.h>
#include <cblas.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/ops/gemm_backends.h>
#include <tapegrad/core/ops/matmul.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include "workloads.h"
#include "side_by_side_conv.h"
#if __has_include(<tapegrad/layers/layer_norm.h>)
#include <tapegrad/layers/layer_norm.h>
#define TG_HAVE_LAYER_NORM 1
#endif

namespace tg = tapegrad;

namespace {

// Wall time, or (--clock cpu) the process's CPU time: with one thread on a machine shared
// with other jobs, CPU time leaves out the time the scheduler gave to someone else.
bool g_cpu_clock = false;
double now() {
  if (g_cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double per_call(const std::function<void()>& f, int k) {
  const double t0 = now();
  for (int i = 0; i < k; ++i) f();
  return (now() - t0) / k;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Case {
  std::string name;
  std::function<void()> tapegrad, libtorch;
};

// ---- libtorch versions -------------------------------------------------------------
torch::nn::Sequential torch_net(const std::vector<int64_t>& sizes, bool bn) {
  torch::nn::Sequential net;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    net->push_back(torch::nn::Linear(sizes[i], sizes[i + 1]));
    if (i + 2 == sizes.size()) break;
    if (bn) net->push_back(torch::nn::BatchNorm1d(sizes[i + 1]));
    net->push_back(torch::nn::ReLU());
  }
  return net;
}

struct TorchStep {
  torch::nn::Sequential net;
  std::unique_ptr<torch::optim::SGD> sgd;
  torch::Tensor x, y;
  TorchStep(const std::vector<int64_t>& sizes, int64_t batch, double lr) : net(torch_net(sizes, true)) {
    net->train();
    sgd = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(lr));
    x = torch::randn({batch, sizes.front()});
    y = torch::randn({batch, sizes.back()});
  }
  double step() {
    auto loss = torch::mse_loss(net->forward(x), y);
    sgd->zero_grad();
    loss.backward();
    sgd->step();
    return loss.item<double>();
  }
};

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  // matmul, forward only
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
           {32, 50, 128}, {32, 128, 64}, {256, 256, 256}, {1024, 4096, 4096}}) {
    auto a = std::make_shared<tg::Tensor>(tg::randn({M, K})), b = std::make_shared<tg::Tensor>(tg::randn({K, N}));
    auto ta = std::make_shared<torch::Tensor>(torch::randn({M, K})), tb = std::make_shared<torch::Tensor>(torch::randn({K, N}));
    cases.push_back({"matmul " + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N),
                     [a, b] {
                       tg::NoGradGuard ng;
                       tg::matmul(*a, *b);
                     },
                     [ta, tb] {
                       torch::NoGradGuard ng;
                       torch::mm(*ta, *tb);
                     }});
  }
  // norms, forward + backward in train mode
  for (auto [N, C] : std::vector<std::array<int64_t, 2>>{{32, 128}, {65536, 256}}) {
    auto x = std::make_shared<tg::Tensor>(tg::randn({N, C}));
    x->requires_grad_();
    auto g = std::make_shared<tg::Tensor>(tg::randn({N, C}));
    auto tx = std::make_shared<torch::Tensor>(torch::randn({N, C}).requires_grad_());
    auto tgr = std::make_shared<torch::Tensor>(torch::randn({N, C}));
    const std::string shape = "(" + std::to_string(N) + "," + std::to_string(C) + ")";
    auto bn = std::make_shared<tg::layers::BatchNorm1d>(C);
    auto tbn = torch::nn::BatchNorm1d(C);
    cases.push_back({"BatchNorm1d fwd+bwd " + shape,
                     [=] {
                       x->zero_grad();
                       bn->zero_grad();
                       (*bn)(*x).backward(*g);
                     },
                     [=]() mutable {
                       tx->mutable_grad() = torch::Tensor();
                       tbn->zero_grad();
                       tbn->forward(*tx).backward(*tgr);
                     }});
#ifdef TG_HAVE_LAYER_NORM
    auto ln = std::make_shared<tg::layers::LayerNorm>(tg::Shape{C});
    auto tln = torch::nn::LayerNorm(torch::nn::LayerNormOptions({C}));
    cases.push_back({"LayerNorm fwd+bwd " + shape,
                     [=] {
                       x->zero_grad();
                       ln->zero_grad();
                       (*ln)(*x).backward(*g);
                     },
                     [=]() mutable {
                       tx->mutable_grad() = torch::Tensor();
                       tln->zero_grad();
                       tln->forward(*tx).backward(*tgr);
                     }});
#endif
  }
  {  // Linear + ReLU, batch 32
    tg::Generator gen(0);
    auto lin = std::make_shared<tg::layers::Linear>(50, 128, true, tg::Dtype::Float32, gen);
    auto x = std::make_shared<tg::Tensor>(tg::randn({32, 50}));
    auto g = std::make_shared<tg::Tensor>(tg::randn({32, 128}));
    auto tlin = torch::nn::Linear(50, 128);
    auto tx = std::make_shared<torch::Tensor>(torch::randn({32, 50}));
    auto tgr = std::make_shared<torch::Tensor>(torch::randn({32, 128}));
    cases.push_back({"Linear(50,128)+ReLU fwd+bwd, batch 32",
                     [=] {
                       lin->zero_grad();
                       tg::relu((*lin)(*x)).backward(*g);
                     },
                     [=]() mutable {
                       tlin->zero_grad();
                       torch::relu(tlin->forward(*tx)).backward(*tgr);
                     }});
  }
  {
    auto ts = std::make_shared<tgbench::TrainStep>(std::vector<std::int64_t>{50, 128, 64, 32, 1}, true, 32);
    auto th = std::make_shared<TorchStep>(std::vector<int64_t>{50, 128, 64, 32, 1}, 32, 0.01);
    cases.push_back({"chapter BN net step [50,128,64,32,1], batch 32", [ts] { ts->step(); }, [th] { th->step(); }});
  }
  {
    const std::vector<std::int64_t> sizes{1024, 4096, 4096, 1024};
    auto ts = std::make_shared<tgbench::TrainStep>(sizes, true, 1024, 1e-3);
    auto th = std::make_shared<TorchStep>(std::vector<int64_t>(sizes.begin(), sizes.end()), 1024, 1e-3);
    cases.push_back({"large step [1024,4096,4096,1024], batch 1024", [ts] { ts->step(); }, [th] { th->step(); }});
  }
  for (auto& [name, a, b] : tgconv::conv_rows()) cases.push_back({name, a, b});
  return cases;
}

// The chapter BN-net step's products alone (net [50,128,64,32,1], batch 32; forward x·Wᵀ,
// backward dy·W except for the first layer, dyᵀ·x) through detail::gemm, timed as the step
// is, against OpenBLAS sgemm at 1024³ in the same run. Prints the
// GEMMs' share of the step.
void print_gemm_share(double step_seconds) {
  const std::vector<std::int64_t> sizes{50, 128, 64, 32, 1};
  const std::int64_t batch = 32;
  struct P {
    bool ta, tb;
    tg::Tensor a, b, c;
  };
  std::vector<P> ps;
  double flops = 0;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
    const std::int64_t in = sizes[l], out = sizes[l + 1];
    tg::Tensor x = tg::randn({batch, in}), w = tg::randn({out, in}), dy = tg::randn({batch, out});
    ps.push_back({false, true, x, w, tg::Tensor::empty({batch, out})});
    if (l > 0) ps.push_back({false, false, dy, w, tg::Tensor::empty({batch, in})});
    ps.push_back({true, false, dy, x, tg::Tensor::empty({out, in})});
    flops += 2.0 * batch * in * out * (l > 0 ? 3 : 2);
  }
  auto all = [&] {
    for (auto& p : ps) tg::detail::gemm(p.ta, p.tb, p.a, p.b, p.c);
  };
  all();
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) t.push_back(per_call(all, 2000));
  const double g = median(t);
  const int n = 1024;
  tg::Tensor a = tg::randn({n, n}), b = tg::randn({n, n}), c = tg::Tensor::empty({n, n});
  auto sg = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
                c.data<float>(), n);
  };
  sg();
  t.clear();
  for (int r = 0; r < 3; ++r) t.push_back(per_call(sg, 3));
  const double peak = 2.0 * n * n * n / median(t) / 1e9, rate = flops / g / 1e9;
  std::printf("  of which GEMMs (%zu products through detail::gemm): %.1f us = %.0f%% of the step; %.1f GFLOP/s = %.0f%% of sgemm "
              "1024^3 (OpenBLAS, same threads) %.1f GFLOP/s\n",
              ps.size(), g * 1e6, 100 * g / step_seconds, rate, 100 * rate / peak, peak);
}

long rss_kib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * 4;
}

int peak_mode(const std::string& engine) {
  const std::vector<std::int64_t> sizes{1024, 4096, 4096, 1024};
  const long base = rss_kib();
  if (engine == "tapegrad") {
    tgbench::TrainStep ts(sizes, true, 1024, 1e-3);
    ts.step();
    ts.step();
  } else if (engine == "libtorch") {
    TorchStep th(std::vector<int64_t>(sizes.begin(), sizes.end()), 1024, 1e-3);
    th.step();
    th.step();
  } else {
    std::fprintf(stderr, "--peak expects tapegrad or libtorch\n");
    return 2;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%s large-net step: peak RSS growth %.1f MiB", engine.c_str(), (ru.ru_maxrss - base) / 1024.0);
  if (engine == "tapegrad")
    std::printf(" (allocator peak in use %.1f MiB)", tg::allocator_stats().peak_bytes_in_use / 1048576.0);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 5;
  std::string only, peak;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--peak")) peak = argv[i + 1];
    else if (!std::strcmp(argv[i], "--clock")) g_cpu_clock = !std::strcmp(argv[i + 1], "cpu");
    else {
      std::fprintf(stderr, "usage: side_by_side [--threads N] [--reps R] [--only SUBSTRING] [--clock wall|cpu] | --peak ENGINE\n");
      return 2;
    }
  }
  tg::set_num_threads(threads);
  torch::set_num_threads(threads);
  if (!peak.empty()) return peak_mode(peak);
  std::printf("%s\n", tgbench::machine_line().c_str());
  std::printf("threads %d, %d alternating rounds, medians of %s time\n", threads, reps,
              g_cpu_clock ? "process CPU" : "wall");
  std::printf("%-50s %12s %12s %8s\n", "workload", "tapegrad", "libtorch", "ratio");
  for (auto& c : make_cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    c.tapegrad();  // warm-up (allocator caches, BLAS buffers)
    c.libtorch();
    const double once = std::max(per_call(c.tapegrad, 1), 1e-7);
    const int k = std::max(1, static_cast<int>(0.05 / once));
    std::vector<double> a, b;
    for (int r = 0; r < reps; ++r) {
      if (r % 2 == 0) {
        a.push_back(per_call(c.tapegrad, k));
        b.push_back(per_call(c.libtorch, k));
      } else {
        b.push_back(per_call(c.libtorch, k));
        a.push_back(per_call(c.tapegrad, k));
      }
    }
    const double ta = median(a), tb = median(b);
    auto fmt = [](double s) {
      char buf[32];
      if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
      else std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
      return std::string(buf);
    };
    std::printf("%-50s %12s %12s %7.2fx\n", c.name.c_str(), fmt(ta).c_str(), fmt(tb).c_str(), tb / ta);
    if (c.name.rfind("chapter BN net step", 0) == 0) print_gemm_share(ta);
    std::fflush(stdout);
  }
  return 0;
}
