#pragma once
// Softmax and LogSoftmax modules, PyTorch's nn.Softmax(dim) and nn.LogSoftmax(dim) (the
// implicit dim=None form is not offered). Stateless, the same in train and eval mode; the ops
// (max-shifted, differentiable twice) live in core/ops/softmax.h.
#include <cstdint>
#include <string>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// softmax(x, dim); any rank, `dim` negative from the end. A dim outside the input's rank
/// throws std::out_of_range naming dim and rank.
class Softmax : public Module {
 public:
  /// Softmax along `dim`.
  explicit Softmax(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;  ///< the axis the probabilities sum to 1 over
};

/// log_softmax(x, dim); shapes and throws as Softmax.
class LogSoftmax : public Module {
 public:
  /// LogSoftmax along `dim`.
  explicit LogSoftmax(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LogSoftmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  std::int64_t dim;  ///< the axis normalised over
};

}  // namespace tapegrad::layers
