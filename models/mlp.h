#pragma once
// The chapters' multilayer perceptron.
#include <optional>
#include <vector>

#include "core/random.h"
#include "layers/sequential.h"

namespace tapegrad::models {

struct MLPOptions {
  bool use_batchnorm = false;
  std::optional<double> bn_momentum = 0.1;  ///< PyTorch convention (decay 0.99 = momentum 0.01)
  double bn_eps = 1e-5;
  Dtype dtype = Dtype::Float32;
};

/// MLP over layer_sizes = {in, h1, ..., out}: for each hidden layer Linear -> [BatchNorm1d]
/// -> ReLU, then a plain Linear. Input (N, in) -> output (N, out). Weights are drawn from
/// `gen` in layer order. Throws std::invalid_argument for fewer than 2 sizes.
class MLP : public layers::Sequential {
 public:
  MLP(const std::vector<std::int64_t>& layer_sizes, MLPOptions options = {}, Generator& gen = default_generator());
  std::string type_name() const override { return "MLP"; }
};

}  // namespace tapegrad::models
