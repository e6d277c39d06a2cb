#pragma once
// Shared by the tests of debug/: the small BatchNorm network the detectors watch.
#include <cstdint>
#include <memory>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/activation.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>

namespace debug_test {

/// Linear(4, 6) -> BatchNorm1d(6) -> ReLU -> Linear(6, 1), float32, weights from Generator(seed).
inline std::shared_ptr<tapegrad::layers::Sequential> small_bn_net(std::uint64_t seed = 1) {
  using namespace tapegrad;
  Generator g(seed);
  auto net = std::make_shared<layers::Sequential>();
  net->push_back(std::make_shared<layers::Linear>(4, 6, true, Dtype::Float32, g));
  net->push_back(std::make_shared<layers::BatchNorm1d>(6));
  net->push_back(std::make_shared<layers::ReLU>());
  net->push_back(std::make_shared<layers::Linear>(6, 1, true, Dtype::Float32, g));
  return net;
}

}  // namespace debug_test
