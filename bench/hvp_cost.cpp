// The cost of a Hessian-vector product against one gradient on the Fashion-MNIST MLP
// (784 -> 256 -> 128 -> 10, ReLU, cross-entropy, batch 256, float32): median wall seconds of
// N repetitions of each, alternated, and their ratio. bench/hvp_cost.py runs the same net and
// batch in PyTorch (torch.autograd.functional.hvp and the double-grad trick).
//   hvp_cost [repetitions, default 30] [--norm batch]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>

#include "workloads.h"

using namespace tapegrad;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  models::MLPOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--norm" && i + 1 < argc)
      o.norm = models::parse_norm(argv[++i]);
    else
      reps = std::max(3, std::atoi(argv[i]));
  }
  Generator gen(0);
  models::MLP net({784, 256, 128, 10}, o, gen);
  const Tensor x = randn({256, 784}, Dtype::Float32, gen);
  std::vector<std::int64_t> labels(256);
  for (auto& l : labels) l = gen.randint(10);
  const Tensor y = Tensor::from_int64(labels, {256});
  const std::vector<Tensor> params = net.parameters();
  std::vector<Tensor> v;
  for (const Tensor& p : params) v.push_back(randn(p.shape(), Dtype::Float32, gen));
  std::vector<double> tg, th;
  double sink = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    {
      Tensor loss = layers::cross_entropy(net.forward(x), y);
      std::vector<Tensor> g = autograd::grad({loss}, params);
      sink += g[0].at(0);
    }
    tg.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    {
      Tensor loss = layers::cross_entropy(net.forward(x), y);
      std::vector<Tensor> hv = autograd::hessian_vector_product(loss, params, v);
      sink += hv[0].at(0);
    }
    th.push_back(seconds_since(t0));
  }
  const double g = median(tg), h = median(th);
  std::printf("%s\n", tgbench::machine_line().c_str());
  std::printf("Fashion-MNIST MLP 784-256-128-10 (%s), batch 256, float32, %d repetitions\n",
              models::norm_name(o.norm).c_str(), reps);
  std::printf("gradient (forward + backward): median %.3f ms\n", g * 1e3);
  std::printf("Hessian-vector product (forward + create_graph backward + backward): median %.3f ms\n", h * 1e3);
  std::printf("ratio HVP / gradient: %.2f   (checksum %g)\n", h / g, sink);
  return 0;
}
