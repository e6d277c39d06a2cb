// The chapter BN-net step (net [50,128,64,32,1], batch 32, SGD lr 0.01: side_by_side's
// "chapter BN net step") run W times untimed and then N times inside measured_steps(), so
// that an instruction counter can be pointed at the steps alone:
//   valgrind --tool=callgrind --toggle-collect='*measured_steps*' build/bench/step_count 50 200
//   perf stat -e instructions build/bench/step_count 50 20000   (minus a run with N = 0)
//   step_count W N [--clip]    --clip: the chapter's nets (BN momentum 0.01, activation clip 10,
//                              gradient values clipped at 5), as bn_experiments trains them
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/clip_grad.h>
#include <tapegrad/optim/sgd.h>
#include "workloads.h"

namespace tg = tapegrad;

namespace {
struct Step {
  std::shared_ptr<tg::layers::Sequential> net;
  std::unique_ptr<tg::optim::SGD> sgd;
  std::vector<tg::Tensor> params;
  tg::Tensor x, y;
  bool clip = false;
  double run() {
    tg::Tensor loss = tg::layers::mse_loss((*net)(x), y);
    const double lv = loss.item();
    sgd->zero_grad();
    loss.backward();
    if (clip) tg::optim::clip_grad_value_(params, 5.0);
    sgd->step();
    return lv;
  }
};

[[gnu::noinline]] double measured_steps(Step& s, long n) {
  double acc = 0;
  for (long i = 0; i < n; ++i) acc += s.run();
  return acc;
}
}  // namespace

int main(int argc, char** argv) {
  const long warm = argc > 1 ? std::atol(argv[1]) : 50;
  const long n = argc > 2 ? std::atol(argv[2]) : 200;
  const bool clip = argc > 3 && std::strcmp(argv[3], "--clip") == 0;
  const std::vector<std::int64_t> sizes{50, 128, 64, 32, 1};
  tg::Generator gen(0);
  Step s;
  s.clip = clip;
  s.net = tgbench::make_net(sizes, true, clip ? 0.01 : 0.1, clip ? std::optional<double>(10.0) : std::nullopt, gen);
  s.net->train();
  tg::optim::SGDOptions so;
  so.lr = 0.01;
  s.params = s.net->parameters();
  s.sgd = std::make_unique<tg::optim::SGD>(s.params, so);
  s.x = tg::randn({32, sizes.front()}, tg::Dtype::Float32, gen);
  s.y = tg::randn({32, sizes.back()}, tg::Dtype::Float32, gen);
  measured_steps(s, warm);
  const double acc = measured_steps(s, n);
  std::printf("%ld steps, loss sum %.9g\n", n, acc);
  return 0;
}
