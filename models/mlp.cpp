#include "models/mlp.h"

#include <memory>
#include <stdexcept>

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/linear.h"

namespace tapegrad::models {

MLP::MLP(const std::vector<std::int64_t>& sizes, MLPOptions opts, Generator& gen) {
  if (sizes.size() < 2)
    throw std::invalid_argument("MLP: expected at least 2 layer sizes (in, out), got " + std::to_string(sizes.size()));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    push_back(std::make_shared<layers::Linear>(sizes[i], sizes[i + 1], true, opts.dtype, gen));
    if (i + 2 == sizes.size()) break;
    if (opts.use_batchnorm) {
      layers::BatchNormOptions bo;
      bo.momentum = opts.bn_momentum;
      bo.eps = opts.bn_eps;
      bo.dtype = opts.dtype;
      push_back(std::make_shared<layers::BatchNorm1d>(sizes[i + 1], bo));
    }
    push_back(std::make_shared<layers::ReLU>());
  }
}

}  // namespace tapegrad::models
