#pragma once
// The chapters' multilayer perceptron.
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/sequential.h>

namespace tapegrad::models {

/// Normalisation placed after each hidden Linear.
enum class Norm { None, Batch, Layer, Group };
/// "none", "batch", "layer", "group".
std::string norm_name(Norm n);
/// Inverse of norm_name; throws std::invalid_argument naming the accepted values.
Norm parse_norm(const std::string& s);

/// Normalisation, regularisation and dtype of an MLP's hidden layers.
struct MLPOptions {
  Norm norm = Norm::None;                   ///< normalisation after each hidden Linear
  std::optional<double> bn_momentum = 0.1;  ///< BatchNorm's momentum, PyTorch convention (decay 0.99 = momentum 0.01)
  double norm_eps = 1e-5;                   ///< eps of the norm layers (BatchNorm, LayerNorm, GroupNorm)
  bool bn_unbiased_running_var = true;      ///< BatchNormOptions::unbiased_running_var
  double dropout = 0.0;                     ///< Dropout(p) after each hidden activation when p > 0
  Generator* dropout_gen = nullptr;         ///< the dropout masks' generator (nullptr: the default one)
  std::int64_t groups = 4;                  ///< GroupNorm groups (must divide each hidden width)
  std::optional<double> act_clip;           ///< clamp each hidden activation to [-c, c] after the ReLU
  Dtype dtype = Dtype::Float32;             ///< dtype of every parameter and buffer
};

/// MLP over layer_sizes = {in, h1, ..., out}: for each hidden layer Linear -> [norm] -> ReLU
/// -> [Clamp(-c, c)] -> [Dropout(p)], then a plain Linear. Input (N, in) -> output (N, out). Weights are
/// drawn from `gen` in layer order (so nets that differ only in norm/clip get the same
/// Linear weights from the same seed). Throws std::invalid_argument for fewer than 2 sizes,
/// a non-positive act_clip, a dropout outside [0, 1), or a GroupNorm whose groups do not divide a hidden width.
class MLP : public layers::Sequential {
 public:
  /// Builds the MLP described above; throws as it says.
  MLP(const std::vector<std::int64_t>& layer_sizes, MLPOptions options = {}, Generator& gen = default_generator());
  std::string type_name() const override { return "MLP"; }
};

}  // namespace tapegrad::models
