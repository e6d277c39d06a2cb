#pragma once
// Losses: the functions (layers/functional/losses.h, also reachable as layers::mse_loss ...)
// and module-style wrappers holding their options (PyTorch's nn.MSELoss, ...).
#include <cstdint>

#include <tapegrad/layers/functional/losses.h>

namespace tapegrad::layers {

using functional::binary_cross_entropy_with_logits;
using functional::cross_entropy;
using functional::mse_loss;
using functional::nll_loss;
using functional::parse_reduction;
using functional::Reduction;

/// Module-style wrappers: a loss object holding its options, called as loss(input, target).
struct MSELoss {
  Reduction reduction = Reduction::Mean;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return mse_loss(input, target, reduction); }
};
struct CrossEntropyLoss {
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;
  Tensor operator()(const Tensor& logits, const Tensor& target) const {
    return cross_entropy(logits, target, reduction, ignore_index);
  }
};
struct NLLLoss {
  Reduction reduction = Reduction::Mean;
  std::int64_t ignore_index = -100;
  Tensor operator()(const Tensor& log_probs, const Tensor& target) const {
    return nll_loss(log_probs, target, reduction, ignore_index);
  }
};
struct BCEWithLogitsLoss {
  Reduction reduction = Reduction::Mean;
  Tensor operator()(const Tensor& logits, const Tensor& target) const {
    return binary_cross_entropy_with_logits(logits, target, reduction);
  }
};

}  // namespace tapegrad::layers
