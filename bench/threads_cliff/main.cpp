// The small CNN of docs/threads.md, timed: 150 SGD steps of Conv(1->8, 3x3, padding 1) -
// BatchNorm2d(8) - ReLU - MaxPool(2) - Linear(512 -> 10) on one batch of 32 random 16x16
// images, at the default thread count. bench/threads_cliff.sh runs it idle and beside one
// busy process; torch_cnn.py does the same in PyTorch.
// Usage: threads_cliff [steps=150] [repeats=5]; prints the median and the best of the repeats.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <tapegrad/core/core.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/flatten.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/pooling.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 150;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  Generator gen(0);
  const Tensor x = randn({32, 1, 16, 16}, Dtype::Float32, gen);
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 32; ++i) labels.push_back(gen.randint(10));
  const Tensor y = Tensor::from_int64(labels, {32});
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    Generator init(1);
    auto net = std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{
        std::make_shared<layers::Conv2d>(1, 8, 3, 1, 1, 1, 1, true, Dtype::Float32, init),
        std::make_shared<layers::BatchNorm2d>(8), std::make_shared<layers::ReLU>(),
        std::make_shared<layers::MaxPool2d>(2), std::make_shared<layers::Flatten>(),
        std::make_shared<layers::Linear>(8 * 8 * 8, 10, true, Dtype::Float32, init)});
    optim::SGD opt(net->parameters(), {.lr = 0.05});
    const auto t0 = std::chrono::steady_clock::now();
    double last = 0;
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      Tensor loss = layers::cross_entropy((*net)(x), y);
      loss.backward();
      opt.step();
      if (s + 1 == steps) last = loss.item();
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (r == 0) std::fprintf(stderr, "final loss %.4f\n", last);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf("tapegrad small CNN: %d steps, %d threads: median %.1f ms, best %.1f ms (%d runs)\n", steps,
              get_num_threads(), sorted[sorted.size() / 2], sorted.front(), repeats);
  return 0;
}
