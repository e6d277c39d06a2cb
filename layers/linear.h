#pragma once
#include <tapegrad/core/random.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

/// Linear's arguments (layers/options.h): LinearOptions(in_features, out_features) with
/// bias true, float32.
class LinearOptions {
 public:
  LinearOptions(std::int64_t in_features, std::int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TAPEGRAD_ARG(std::int64_t, in_features);
  TAPEGRAD_ARG(std::int64_t, out_features);
  TAPEGRAD_ARG(bool, bias, true);
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
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true, Dtype dtype = Dtype::Float32,
         Generator& gen = default_generator());
  /// From options: Linear(LinearOptions(784, 10).bias(false), gen).
  explicit Linear(const LinearOptions& options, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  std::int64_t in_features, out_features;
  Tensor weight, bias;  ///< bias undefined when bias=false
};

}  // namespace tapegrad::layers
