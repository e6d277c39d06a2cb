#pragma once
// A small convolutional classifier: conv-norm-ReLU-pool blocks and a linear head, the
// modern block of the chapter ("convolution → BN → ReLU").
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/sequential.h>

namespace tapegrad::models {

/// Normalisation of each conv block: BatchNorm2d, GroupNorm(groups, C), InstanceNorm2d
/// (affine), LayerNorm over (C, H, W), or none.
enum class ConvNorm { None, Batch, Group, Instance, Layer };
/// "none", "batch", "group", "instance", "layer".
std::string conv_norm_name(ConvNorm n);
/// Inverse of conv_norm_name; throws std::invalid_argument naming the accepted values.
ConvNorm parse_conv_norm(const std::string& s);

/// The norm layer after a conv block (conv = true; shape = its output's (C, H, W)) or after
/// the head's hidden Linear (conv = false; shape = (hidden)), or nullptr for none.
using NormFactory = std::function<layers::ModulePtr(std::int64_t features, bool conv, const Shape& shape)>;

/// Architecture of a CNN; the defaults are the Fashion-MNIST reference net.
struct CNNOptions {
  std::int64_t in_channels = 1;               ///< image channels
  ///@{
  /// Input image size H, W (each block halves it, floor).
  std::int64_t height = 28, width = 28;
  ///@}
  std::vector<std::int64_t> channels{32, 64};  ///< output channels of each conv block
  std::int64_t hidden = 128;                  ///< width of the hidden Linear of the head (0: none)
  std::int64_t num_classes = 10;              ///< output logits per sample
  ConvNorm norm = ConvNorm::Batch;            ///< normalisation of the blocks (and the head)
  std::int64_t groups = 8;                    ///< GroupNorm groups (must divide every width)
  std::optional<double> bn_momentum = 0.1;    ///< PyTorch convention
  double eps = 1e-5;                          ///< eps of every norm layer
  Dtype dtype = Dtype::Float32;               ///< dtype of every parameter and buffer
  /// When set, makes every norm layer instead of `norm` (groups, bn_momentum and eps are
  /// then the factory's business): e.g. per-replica or renormalised BatchNorm variants.
  NormFactory norm_factory{};
};

/// For each c in channels: Conv2d(prev, c, 3, padding 1) -> norm -> ReLU -> MaxPool2d(2).
/// Then Flatten -> [Linear(C·H·W, hidden) -> head norm -> ReLU] -> Linear(…, num_classes).
/// The head norm follows the conv norm on (N, hidden): BatchNorm1d for batch, GroupNorm for
/// group, LayerNorm for layer, none for instance and none.
/// Input (N, in_channels, height, width) -> logits (N, num_classes). With the defaults this
/// is the reference net Conv(1→32)-BN-ReLU-Pool-Conv(32→64)-BN-ReLU-Pool-
/// Linear(3136→128)-BN-ReLU-Linear(128→10). Weights are drawn from `gen` in layer order.
/// Throws std::invalid_argument for no blocks, a size that pools below 1, non-positive
/// widths, or groups not dividing a width (and whatever norm_factory throws).
class CNN : public layers::Sequential {
 public:
  /// Builds the network described above from `options`, drawing weights from `gen`.
  explicit CNN(CNNOptions options = {}, Generator& gen = default_generator());
  std::string type_name() const override { return "CNN"; }
};

}  // namespace tapegrad::models
