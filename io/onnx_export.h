#pragma once
// Exporting eval-mode models to ONNX (opset 17, IR version 8) with a dynamic batch dimension.
// The mapping of each module to ONNX operators, and what ONNX Runtime and OpenCV's DNN module
// accept: docs/onnx.md.
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/shape.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::io {

/// Names, metadata and an optional input standardisation of an exported ONNX graph.
struct OnnxExportOptions {
  ///@{
  /// Names of the graph's input and output (default "input", "output").
  std::string input_name = "input", output_name = "output";
  ///@}
  std::string graph_name = "tapegrad";  ///< GraphProto.name
  std::string doc_string;               ///< ModelProto.doc_string (empty: none)
  /// Model metadata (ModelProto.metadata_props), e.g. {"preprocess", "..."}.
  std::vector<std::pair<std::string, std::string>> metadata;
  /// When set, the graph begins with (input − input_mean)/input_std: one value for every
  /// feature (size 1) or one per element of the sample shape (size = its numel). Both or
  /// neither; every std > 0.
  ///@{
  /// The standardisation's mean and std (see above); empty: none.
  std::vector<double> input_mean, input_std;
  ///@}
};

/// Serialised ONNX ModelProto of `model` (a module tree of Sequential and the layers below)
/// for inputs of shape (N, sample_shape...) with N symbolic ("N"). The graph's input and
/// output have the model's dtype (float32 -> FLOAT, float64 -> DOUBLE); weights are
/// initializers named by their state_dict keys.
/// Mapping: Linear -> Gemm (rank-2 input; MatMul + Add otherwise); Conv2d -> Conv;
/// BatchNorm1d/2d -> BatchNormalization on (N, C, ...), and on (N, C) the same affine map as
/// Mul + Add (s = γ/√(var + eps), t = β − s·mean, computed in float64); LayerNorm -> ReduceMean,
/// Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Add (no LayerNormalization: OpenCV 4.6 rejects
/// it); GroupNorm -> Reshape (N, G, -1), InstanceNormalization, Reshape back, Mul, Add;
/// InstanceNorm1d/2d -> InstanceNormalization (BatchNormalization when it tracks running
/// statistics); MaxPool2d -> MaxPool; AvgPool2d -> AveragePool (ceil_mode as explicit end
/// pads giving tapegrad's output size: a Pad of -inf first where ONNX Runtime's pads < kernel
/// limit needs it, a Mul rescaling to tapegrad's count_include_pad divisor); AdaptiveAvgPool2d ->
/// GlobalAveragePool for (1, 1), AveragePool when the input divides evenly; ReLU, Sigmoid,
/// Tanh, LeakyReLU -> Relu, Sigmoid, Tanh, LeakyRelu; GELU -> its erf (or tanh) formula;
/// Clamp -> Clip; Flatten -> Flatten (start_dim 1 to the end) or Reshape; Unflatten ->
/// Reshape; Dropout and Identity emit no node.
/// Throws std::invalid_argument when a module is in train mode, for a module kind without a
/// mapping (naming its path and type), for a BatchNorm without running statistics, for a
/// Flatten/Unflatten that touches the batch dim, for an AdaptiveAvgPool2d whose windows
/// differ, and when the model does not accept (2, sample_shape...) (the forward's error).
/// Warns (core/warnings.h, kind "no_float64_kernel") when a float64 graph has an op ONNX
/// Runtime's CPU provider has no float64 kernel for (Conv, Erf, InstanceNormalization,
/// AveragePool, GlobalAveragePool; the table: docs/onnx.md).
std::string export_onnx(layers::Module& model, const Shape& sample_shape, const OnnxExportOptions& options = {});

/// export_onnx written to `path` (replaced atomically: written beside it and renamed).
/// Throws std::runtime_error when the file cannot be written.
void save_onnx(layers::Module& model, const Shape& sample_shape, const std::string& path,
               const OnnxExportOptions& options = {});

}  // namespace tapegrad::io
