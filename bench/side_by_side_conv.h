#pragma once
// Convolution rows of bench/side_by_side: each Conv2d of the reference CNN forward +
// backward, and the whole CNN training step, tapegrad and libtorch on the same shapes.
// Included by side_by_side.cpp only.
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <tapegrad/core/ops.h>
#include <tapegrad/layers/conv.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/optim/sgd.h>

namespace tgconv {

namespace tg = tapegrad;
using Row = std::tuple<std::string, std::function<void()>, std::function<void()>>;

// The reference net in libtorch: Conv(1→32)-BN-ReLU-Pool-Conv(32→64)-BN-ReLU-Pool-
// Linear(3136→128)-BN-ReLU-Linear(128→10).
inline torch::nn::Sequential torch_cnn() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::BatchNorm2d(32), nn::ReLU(),
                        nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::BatchNorm2d(64),
                        nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(3136, 128), nn::BatchNorm1d(128),
                        nn::ReLU(), nn::Linear(128, 10));
}

inline std::vector<Row> conv_rows() {
  std::vector<Row> rows;
  const std::int64_t B = 128;
  struct ConvShape {
    std::int64_t cin, cout, hw;
  };
  // batch 128 (the training step) and a small batch (16, where per-call overheads show)
  for (std::int64_t nb : {B, std::int64_t{16}})
  for (ConvShape s : {ConvShape{1, 32, 28}, ConvShape{32, 64, 14}}) {
    tg::Generator gen(0);
    auto conv = std::make_shared<tg::layers::Conv2d>(s.cin, s.cout, 3, 1, 1, 1, 1, true, tg::Dtype::Float32, gen);
    auto x = std::make_shared<tg::Tensor>(tg::randn({nb, s.cin, s.hw, s.hw}));
    x->requires_grad_();
    auto g = std::make_shared<tg::Tensor>(tg::randn({nb, s.cout, s.hw, s.hw}));
    auto tconv = torch::nn::Conv2d(torch::nn::Conv2dOptions(s.cin, s.cout, 3).padding(1));
    auto tx = std::make_shared<torch::Tensor>(torch::randn({nb, s.cin, s.hw, s.hw}).requires_grad_());
    auto tgr = std::make_shared<torch::Tensor>(torch::randn({nb, s.cout, s.hw, s.hw}));
    rows.emplace_back("Conv2d " + std::to_string(s.cin) + "->" + std::to_string(s.cout) + " 3x3 on " +
                          std::to_string(s.hw) + "x" + std::to_string(s.hw) + " fwd+bwd, batch " + std::to_string(nb),
                      [=] {
                        x->zero_grad();
                        conv->zero_grad();
                        (*conv)(*x).backward(*g);
                      },
                      [=]() mutable {
                        tx->mutable_grad() = torch::Tensor();
                        tconv->zero_grad();
                        tconv->forward(*tx).backward(*tgr);
                      });
  }
  {
    tg::Generator gen(1);
    auto net = std::make_shared<tg::models::CNN>(tg::models::CNNOptions{}, gen);
    net->train();
    auto sgd = std::make_shared<tg::optim::SGD>(net->parameters(), tg::optim::SGDOptions{0.01, 0.9});
    auto x = std::make_shared<tg::Tensor>(tg::randn({B, 1, 28, 28}));
    std::vector<std::int64_t> labels(B);
    for (std::int64_t i = 0; i < B; ++i) labels[i] = i % 10;
    auto y = std::make_shared<tg::Tensor>(tg::Tensor::from_int64(labels, {B}));
    tg::layers::CrossEntropyLoss ce;
    auto tnet = std::make_shared<torch::nn::Sequential>(torch_cnn());
    (*tnet)->train();
    auto tsgd = std::make_shared<torch::optim::SGD>((*tnet)->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    auto tx = std::make_shared<torch::Tensor>(torch::randn({B, 1, 28, 28}));
    auto ty = std::make_shared<torch::Tensor>(torch::arange(B, torch::kLong) % 10);
    rows.emplace_back(
        "CNN step (reference net, SGD momentum), batch 128",
        [=] {
          sgd->zero_grad();
          ce(net->forward(*x), *y).backward();
          sgd->step();
        },
        [=] {
          tsgd->zero_grad();
          torch::nn::functional::cross_entropy((*tnet)->forward(*tx), *ty).backward();
          tsgd->step();
        });
  }
  return rows;
}

}  // namespace tgconv
