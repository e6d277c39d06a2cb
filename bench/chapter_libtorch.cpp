// The chapter's full workload in libtorch, for timing against tapegrad:
//   chapter_libtorch [--threads N] [--epochs E]
// Experiments 1-3 as the chapter's code runs them: 14 trainings (Exp 1: BN and plain
// [50,128,64,32,1] at lr 0.01; Exp 2: the same at lr 0.001/0.01/0.05; Exp 3: 5-, 10- and
// 15-layer nets at lr 0.01), 200 epochs of 6 SGD steps at batch 32 on 200 samples,
// gradients clipped elementwise at 5 (not for the plain depth nets), hidden activations
// clipped to [-10, 10], BN momentum 0.01, train-mode evaluation of train and test sets
// after every epoch, a run stops when a loss exceeds 1e10 or is not finite.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct Config {
  std::vector<int64_t> sizes;
  bool bn;
  double lr;
  bool grad_clip;
};

torch::nn::Sequential make_net(const std::vector<int64_t>& sizes, bool bn) {
  torch::nn::Sequential net;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    net->push_back(torch::nn::Linear(sizes[i], sizes[i + 1]));
    if (i + 2 == sizes.size()) break;
    if (bn) net->push_back(torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(sizes[i + 1]).momentum(0.01)));
    net->push_back(torch::nn::ReLU());
    net->push_back(torch::nn::Hardtanh(torch::nn::HardtanhOptions().min_val(-10).max_val(10)));
  }
  return net;
}

bool crashed(double l) { return !std::isfinite(l) || l > 1e10; }

int64_t train_one(const Config& c, const torch::Tensor& xtr, const torch::Tensor& ytr, const torch::Tensor& xte,
                  const torch::Tensor& yte, int epochs, int64_t batch) {
  auto net = make_net(c.sizes, c.bn);
  net->train();
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(c.lr));
  const int64_t n = xtr.size(0), steps = n / batch;
  int64_t taken = 0;
  for (int e = 0; e < epochs; ++e) {
    auto perm = torch::randperm(n, torch::kLong);
    auto xs = xtr.index_select(0, perm), ys = ytr.index_select(0, perm);
    for (int64_t s = 0; s < steps; ++s) {
      auto xb = xs.narrow(0, s * batch, batch), yb = ys.narrow(0, s * batch, batch);
      auto loss = torch::mse_loss(net->forward(xb), yb);
      if (crashed(loss.item<double>())) return taken;
      sgd.zero_grad();
      loss.backward();
      if (c.grad_clip) torch::nn::utils::clip_grad_value_(net->parameters(), 5.0);
      sgd.step();
      ++taken;
    }
    torch::NoGradGuard ng;
    const double l1 = torch::mse_loss(net->forward(xtr), ytr).item<double>();
    const double l2 = torch::mse_loss(net->forward(xte), yte).item<double>();
    if (crashed(l1) || crashed(l2)) return taken;
  }
  return taken;
}

void make_data(int64_t n, torch::Tensor& x, torch::Tensor& y) {
  x = torch::randn({n, 50});
  y = (torch::sin(2 * x.select(1, 0)) + torch::cos(x.select(1, 1)) + 0.1 * torch::randn({n})).unsqueeze(1);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, epochs = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--epochs")) epochs = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: chapter_libtorch [--threads N] [--epochs E]\n");
      return 2;
    }
  }
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  const auto t0 = std::chrono::steady_clock::now();
  torch::Tensor xtr, ytr, xte, yte;
  make_data(200, xtr, ytr);
  make_data(100, xte, yte);
  std::vector<Config> configs;
  const std::vector<int64_t> base{50, 128, 64, 32, 1};
  for (bool bn : {true, false}) configs.push_back({base, bn, 0.01, true});
  for (double lr : {0.001, 0.01, 0.05})
    for (bool bn : {true, false}) configs.push_back({base, bn, lr, true});
  std::vector<int64_t> d15{50};
  for (int i = 0; i < 14; ++i) d15.push_back(64);
  d15.push_back(1);
  for (const auto& s : {std::vector<int64_t>{50, 128, 64, 32, 16, 1},
                        std::vector<int64_t>{50, 128, 128, 64, 64, 32, 32, 16, 16, 8, 1}, d15})
    for (bool bn : {true, false}) configs.push_back({s, bn, 0.01, bn});
  int64_t steps = 0;
  for (const auto& c : configs) steps += train_one(c, xtr, ytr, xte, yte, epochs, 32);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("libtorch chapter workload: %lld SGD steps in %.3f s (%d thread%s)\n", static_cast<long long>(steps),
              secs, threads, threads == 1 ? "" : "s");
  return 0;
}
