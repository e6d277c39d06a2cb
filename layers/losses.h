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
/// MSELoss: functional::mse_loss with its reduction (nn.MSELoss).
struct MSELoss {
  /// How the per-sample losses combine: Mean (default), Sum or None.
  Reduction reduction = Reduction::Mean;
  /// The loss of `input` against `target` (see functional::mse_loss for shapes and throws).
  Tensor operator()(const Tensor& input, const Tensor& target) const { return mse_loss(input, target, reduction); }
};
/// functional::cross_entropy of logits (N, C) against int64 classes (N), with its options
/// (nn.CrossEntropyLoss).
struct CrossEntropyLoss {
  /// How the per-sample losses combine: Mean (default), Sum or None.
  Reduction reduction = Reduction::Mean;
  /// Target value whose rows contribute 0 and are not counted by Mean (PyTorch's -100).
  std::int64_t ignore_index = -100;
  /// The loss of `logits` against `target` (shapes and throws: functional::cross_entropy).
  Tensor operator()(const Tensor& logits, const Tensor& target) const {
    return cross_entropy(logits, target, reduction, ignore_index);
  }
};
/// functional::nll_loss of log-probabilities (N, C) against int64 classes (N), with its
/// options (nn.NLLLoss).
struct NLLLoss {
  /// How the per-sample losses combine: Mean (default), Sum or None.
  Reduction reduction = Reduction::Mean;
  /// Target value whose rows contribute 0 and are not counted by Mean (PyTorch's -100).
  std::int64_t ignore_index = -100;
  /// The loss of `log_probs` against `target` (shapes and throws: functional::nll_loss).
  Tensor operator()(const Tensor& log_probs, const Tensor& target) const {
    return nll_loss(log_probs, target, reduction, ignore_index);
  }
};
/// functional::binary_cross_entropy_with_logits with its reduction (nn.BCEWithLogitsLoss).
struct BCEWithLogitsLoss {
  /// How the per-sample losses combine: Mean (default), Sum or None.
  Reduction reduction = Reduction::Mean;
  /// The loss of `logits` against `target` in [0, 1], same shape (see
  /// functional::binary_cross_entropy_with_logits).
  Tensor operator()(const Tensor& logits, const Tensor& target) const {
    return binary_cross_entropy_with_logits(logits, target, reduction);
  }
};

}  // namespace tapegrad::layers
