#pragma once
#include <tapegrad/core/random.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

/// Linear's arguments (layers/options.h): LinearOptions(in_features, out_features) with
/// bias true, float32.
class LinearOptions {
 public:
  /// Options with the required feature counts; the rest default.
  LinearOptions(std::int64_t in_features, std::int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  /// Input features (the input's last dim), >= 0.
  TAPEGRAD_ARG(std::int64_t, in_features);
  /// Output features, >= 0.
  TAPEGRAD_ARG(std::int64_t, out_features);
  /// Whether to add a learnable bias (out_features); default true.
  TAPEGRAD_ARG(bool, bias, true);
  /// dtype of weight and bias; default float32.
  TAPEGRAD_ARG(Dtype, dtype, Dtype::Float32);
};

/// y = x·Wᵀ + b.
/// Input (*, in_features) -> output (*, out_features).
/// Parameters: weight (out_features, in_features), bias (out_features) when bias=true.
/// Init as PyTorch: weight kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)),
/// bias U(-1/sqrt(in), 1/sqrt(in)); drawn from `gen` (default generator if omitted).
/// Throws std::invalid_argument naming the shapes when the input's last dim != in_features.
class Linear : public Module {
 public:
  /// Positional form of LinearOptions (same defaults), initialised from `gen` as above.
  /// Throws std::invalid_argument for negative sizes.
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true, Dtype dtype = Dtype::Float32,
         Generator& gen = default_generator());
  /// From options: Linear(LinearOptions(784, 10).bias(false), gen).
  explicit Linear(const LinearOptions& options, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  ///@{
  /// Feature counts as constructed.
  std::int64_t in_features, out_features;
  ///@}
  ///@{
  /// Parameters: weight (out_features, in_features), bias (out_features); bias is
  /// undefined when constructed with bias = false.
  Tensor weight, bias;
  ///@}
};

}  // namespace tapegrad::layers
