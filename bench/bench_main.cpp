// tapegrad_bench: per-op and per-step benchmarks, plus the streaming triad that every
// bandwidth figure is compared against in the same run.
//   tapegrad_bench --threads=1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// --threads=N (default 1) sets tapegrad's and OpenBLAS's thread count. At the end the
// program prints each bandwidth-bound benchmark as a fraction of the triad's bandwidth and
// each GEMM-bound one as a fraction of raw sgemm.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/parallel.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include "workloads.h"
#if __has_include(<tapegrad/layers/layer_norm.h>)
#include <tapegrad/layers/layer_norm.h>
#define TG_HAVE_LAYER_NORM 1
#endif

namespace tg = tapegrad;
using tg::Tensor;

namespace {

// ---- matmul -------------------------------------------------------------------------
// (M, K) @ (K, N), forward only.
void BM_matmul(benchmark::State& st) {
  const std::int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  Tensor a = tg::randn({M, K}), b = tg::randn({K, N});
  tg::NoGradGuard ng;
  for (auto _ : st) benchmark::DoNotOptimize(tg::matmul(a, b).raw_data());
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_matmul)
    ->Args({32, 50, 128})
    ->Args({32, 128, 64})
    ->Args({32, 64, 32})
    ->Args({128, 128, 128})
    ->Args({256, 256, 256})
    ->Args({1024, 1024, 4096})
    ->Args({1024, 4096, 4096})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Raw OpenBLAS sgemm, the ceiling of the large-net step.
void BM_sgemm_raw(benchmark::State& st) {
  const std::int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  Tensor a = tg::randn({M, K}), b = tg::randn({K, N}), c = Tensor::empty({M, N});
  for (auto _ : st)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N,
                0.0f, c.data<float>(), N);
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_sgemm_raw)->Args({1024, 4096, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- norms: forward + backward, train mode ----------------------------------------
// Bytes: the minimum traffic of forward (read x, write y) and backward (read x, dy,
// write dx) = 5·N·C·4, the same count libtorch's figure uses.
template <class M>
void norm_fwd_bwd(benchmark::State& st, M& module, std::int64_t N, std::int64_t C) {
  Tensor x = tg::randn({N, C});
  x.requires_grad_();
  Tensor g = tg::randn({N, C});
  module.train();
  {  // one untimed step, as training's steady state: the output and gradient blocks are then
     // recycled by the allocator, so the timed steps pay no page faults on fresh buffers
     // (tens of thousands of them at (65536, 256); without this the first, faulting step can be
     // the only one Google Benchmark times)
    Tensor y = module(x);
    y.backward(g);
    x.zero_grad();
    module.zero_grad();
  }
  for (auto _ : st) {
    x.zero_grad();
    module.zero_grad();
    Tensor y = module(x);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * 5 * N * C * 4);
}

void BM_batchnorm1d_fwd_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), C = st.range(1);
  tg::layers::BatchNorm1d bn(C);
  norm_fwd_bwd(st, bn, N, C);
}
BENCHMARK(BM_batchnorm1d_fwd_bwd)->Args({32, 128})->Args({65536, 256})->Unit(benchmark::kMicrosecond)->UseRealTime();

#ifdef TG_HAVE_LAYER_NORM
void BM_layernorm_fwd_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), C = st.range(1);
  tg::layers::LayerNorm ln(tg::Shape{C});
  norm_fwd_bwd(st, ln, N, C);
}
BENCHMARK(BM_layernorm_fwd_bwd)->Args({32, 128})->Args({65536, 256})->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif

// ---- Linear + ReLU forward + backward, batch 32 -------------------------------------
void BM_linear_relu_fwd_bwd(benchmark::State& st) {
  const std::int64_t N = st.range(0), in = st.range(1), out = st.range(2);
  tg::Generator gen(0);
  tg::layers::Linear lin(in, out, true, tg::Dtype::Float32, gen);
  Tensor x = tg::randn({N, in});
  Tensor g = tg::randn({N, out});
  for (auto _ : st) {
    lin.zero_grad();
    Tensor y = tg::relu(lin(x));
    y.backward(g);
    benchmark::DoNotOptimize(lin.weight.grad().raw_data());
  }
}
BENCHMARK(BM_linear_relu_fwd_bwd)->Args({32, 50, 128})->Args({32, 128, 64})->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- training steps -------------------------------------------------------------------
// The chapter's BN net [50,128,64,32,1], batch 32, SGD lr 0.01 (models/optim/loss as users
// write it).
void BM_chapter_bn_step(benchmark::State& st) {
  tgbench::TrainStep ts({50, 128, 64, 32, 1}, true, 32);
  for (auto _ : st) benchmark::DoNotOptimize(ts.step());
}
BENCHMARK(BM_chapter_bn_step)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Large net [1024,4096,4096,1024] with BN + ReLU, batch 1024, SGD: 146 GFLOP of GEMM.
void BM_large_step(benchmark::State& st) {
  tgbench::TrainStep ts({1024, 4096, 4096, 1024}, true, 1024, 1e-3);
  ts.step();  // warm the allocator cache
  for (auto _ : st) benchmark::DoNotOptimize(ts.step());
  st.counters["GFLOP/s"] = benchmark::Counter(146.0e9, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  st.counters["peak_MiB"] = static_cast<double>(tg::allocator_stats().peak_bytes_in_use) / (1 << 20);
}
BENCHMARK(BM_large_step)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

// ---- streaming triad --------------------------------------------------------------------
// a = b + s·c over 64 MiB arrays; STREAM's count: 12 bytes per element.
void BM_triad(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  Tensor a = Tensor::zeros({n}), b = Tensor::ones({n}), c = Tensor::ones({n});
  for (auto _ : st) {
    tgbench::triad(a.data<float>(), b.data<float>(), c.data<float>(), 0.5f, n);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * 12 * n);
}
BENCHMARK(BM_triad)->Arg(65536 * 256)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Console output as usual, plus the best rate of each benchmark for the summary.
class Reporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> bytes_per_s, gflops;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      const std::string name = r.benchmark_name().substr(0, r.benchmark_name().find("_median"));
      auto bps = r.counters.find("bytes_per_second");
      if (bps != r.counters.end()) bytes_per_s[name] = std::max(bytes_per_s[name], double(bps->second));
      auto gf = r.counters.find("GFLOP/s");
      if (gf != r.counters.end()) gflops[name] = std::max(gflops[name], double(gf->second));
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0)
      threads = std::atoi(argv[i] + 10);
    else
      args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  tg::set_num_threads(threads);
  std::printf("%s | threads %d\n", tgbench::machine_line().c_str(), threads);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  Reporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf("\nthreads: %d\n", threads);
  double triad = 0;
  for (auto& [k, v] : rep.bytes_per_s)
    if (k.rfind("BM_triad", 0) == 0) triad = v;
  for (auto& [k, v] : rep.bytes_per_s) {
    if (k.rfind("BM_triad", 0) == 0) continue;
    if (triad > 0)
      std::printf("%-45s %7.2f GB/s = %5.1f%% of the triad's %.2f GB/s\n", k.c_str(), v / 1e9, 100 * v / triad,
                  triad / 1e9);
  }
  double sgemm = 0;
  for (auto& [k, v] : rep.gflops)
    if (k.rfind("BM_sgemm_raw", 0) == 0) sgemm = v;
  for (auto& [k, v] : rep.gflops)
    if (sgemm > 0 && (k.rfind("BM_large_step", 0) == 0 || k.find("1024/4096/4096") != std::string::npos))
      std::printf("%-45s %7.1f GFLOP/s = %5.1f%% of raw sgemm's %.1f GFLOP/s\n", k.c_str(), v / 1e9,
                  100 * v / sgemm, sgemm / 1e9);
  benchmark::Shutdown();
  return 0;
}
