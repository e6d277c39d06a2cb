#pragma once
// Layer normalisation (Ba, Kiros & Hinton 2016, "Layer Normalization"), PyTorch's
// nn.LayerNorm.
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/options.h>

namespace tapegrad::layers {

/// LayerNorm's arguments (layers/options.h): LayerNormOptions(normalized_shape) with eps
/// 1e-5, elementwise_affine true, bias true, float32.
class LayerNormOptions {
 public:
  /// Options with the required normalized_shape (the trailing dims); the rest default.
  explicit LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  /// The trailing dims (D1, ..., Dk) to normalise over; non-empty, every dim >= 1.
  TAPEGRAD_ARG(Shape, normalized_shape);
  /// Added to the variance inside the sqrt; finite, >= 0; default 1e-5.
  TAPEGRAD_ARG(double, eps, 1e-5);
  /// Learnable per-element weight (init 1) and bias (init 0); default true.
  TAPEGRAD_ARG(bool, elementwise_affine, true);
  /// With elementwise_affine: whether the bias exists; default true.
  TAPEGRAD_ARG(bool, bias, true);
  /// dtype of weight and bias; default float32.
  TAPEGRAD_ARG(Dtype, dtype, Dtype::Float32);
};

/// Normalises over the trailing dims given by normalized_shape: an input (*, D1, ..., Dk)
/// with normalized_shape (D1, ..., Dk) gets, for every leading position, the mean and
/// biased variance of its D1·...·Dk values; e.g. (N, C) with normalized_shape (C), or
/// (N, L, C) with (C), or (N, C, H, W) with (C, H, W).
///   y = (x - μ)/sqrt(σ² + eps)·weight + bias
/// Defaults: eps 1e-5, elementwise_affine true (weight ones, bias zeros, both of shape
/// normalized_shape, i.e. per element), bias true (false drops the bias only).
/// No running statistics, no buffers: train and eval mode compute the same thing, and a
/// sample's output never depends on the other samples of its batch.
/// Throws std::invalid_argument naming both shapes when the input's trailing dims are
/// not normalized_shape, and on an empty normalized_shape, a non-positive dim or eps < 0.
class LayerNorm : public Module {
 public:
  /// Positional form of LayerNormOptions (same defaults); throws as the class description says.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true,
                     Dtype dtype = Dtype::Float32);
  /// From options: LayerNorm(LayerNormOptions({C, H, W}).elementwise_affine(false)).
  explicit LayerNorm(const LayerNormOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  /// The trailing dims normalised over.
  Shape normalized_shape;
  /// Added to the variance inside the sqrt.
  double eps;
  /// Whether weight (and bias) exist.
  bool elementwise_affine;
  ///@{
  /// Parameters of shape normalized_shape; undefined unless elementwise_affine (bias: and
  /// bias = true).
  Tensor weight, bias;
  ///@}
};

}  // namespace tapegrad::layers
