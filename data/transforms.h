#pragma once
// Image transforms on float32 (C, H, W) tensors, torchvision.transforms' small set: Resize,
// CenterCrop, RandomCrop (with zero padding), RandomHorizontalFlip, Normalize, and Compose.
//
// Randomness comes from the Generator passed to each call, never from a global one. A loader
// gives every sample its own generator, sample_generator(seed, epoch, index), so a seed
// reproduces every augmented sample whatever the order or the thread that prepares it:
//   Compose aug{{RandomCrop({28, 28}, 2), RandomHorizontalFlip()}};
//   Generator g = sample_generator(seed, epoch, i);
//   Tensor x = aug(folder.get(i), g);
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>
#include <tapegrad/data/sample_source.h>

namespace tapegrad::data {

/// The generator of sample `index` in epoch `epoch` of a run seeded with `seed`: an
/// mt19937_64 seeded with the splitmix64 mix of the three (distinct triples give unrelated
/// streams). Depends on nothing else, so worker threads and sample order cannot change it.
Generator sample_generator(std::uint64_t seed, std::int64_t epoch, std::int64_t index);

/// One transform: image (C, H, W) float32 and the sample's generator -> a new image.
using Transform = std::function<Tensor(const Tensor&, Generator&)>;

/// Applies transforms in order (torchvision's Compose); an empty list is the identity.
struct Compose {
  /// The transforms, applied first to last.
  std::vector<Transform> transforms;
  /// The image through every transform, each drawing from `gen` in turn.
  Tensor operator()(const Tensor& image, Generator& gen) const;
};

/// Bilinear resize to (H', W') (see data::resize in image_folder.h); draws nothing.
/// Throws std::invalid_argument at construction for a size that is not (H', W') >= 1.
struct Resize {
  /// Output (H', W').
  Shape size;
  /// Checks the size.
  explicit Resize(Shape size);
  /// resize(image, size).
  Tensor operator()(const Tensor& image, Generator& gen) const;
};

/// The central (h, w) window (torchvision's CenterCrop: top = round((H - h) / 2),
/// left = round((W - w) / 2), halves rounded to even as Python's round). Draws nothing.
/// Throws std::invalid_argument for a size that is not (h, w) >= 1, or, when called, an
/// image smaller than the window (naming both shapes).
struct CenterCrop {
  /// Window (h, w).
  Shape size;
  /// Checks the size.
  explicit CenterCrop(Shape size);
  /// The window of image (C, H, W) as a new (C, h, w) tensor.
  Tensor operator()(const Tensor& image, Generator& gen) const;
};

/// torchvision's RandomCrop(size, padding): pads every side with `padding` zeros, then takes
/// the (h, w) window at top = gen.randint(H + 2p - h + 1), then left = gen.randint(W + 2p -
/// w + 1) (two draws; none when the padded image is the window's size, as torchvision's
/// get_params). Throws std::invalid_argument for a size that is not (h, w) >= 1 or a
/// negative padding, and, when called, a padded image smaller than the window.
struct RandomCrop {
  /// Window (h, w).
  Shape size;
  /// Zeros added on each of the four sides (default 0).
  std::int64_t padding = 0;
  /// Checks size and padding.
  RandomCrop(Shape size, std::int64_t padding = 0);
  /// A random window of the padded image: (C, h, w).
  Tensor operator()(const Tensor& image, Generator& gen) const;
};

/// Mirrors the image along W with probability p (default 0.5): one draw gen.uniform() < p.
/// Throws std::invalid_argument for p outside [0, 1].
struct RandomHorizontalFlip {
  /// The flip probability.
  double p = 0.5;
  /// Checks p.
  explicit RandomHorizontalFlip(double p = 0.5);
  /// The image, mirrored or copied.
  Tensor operator()(const Tensor& image, Generator& gen) const;
};

/// Per-channel normalisation x' = (x - mean[c]) / std[c] (torchvision's Normalize). The
/// statistics are fitted on the training split (fit) and travel with a checkpoint
/// (state_dict / from_state_dict), like data::Standardizer. Draws nothing.
class Normalize {
 public:
  /// Given statistics, one per channel. Throws std::invalid_argument for empty or
  /// different-size lists, or a std that is not finite and > 0 (naming the channel).
  Normalize(std::vector<double> mean, std::vector<double> std);
  /// Fits one mean and one population std (ddof 0) per channel over every pixel of X
  /// (N, C, H, W) float32, in float64 (two passes: mean, then squared deviations). A
  /// channel whose std is 0 keeps std = 1. Throws std::invalid_argument for another X.
  static Normalize fit(const Tensor& X);
  /// The same statistics over every sample of a source (decoded twice: the mean, then the
  /// squared deviations), without holding the source in memory: the training part of an
  /// ImageFolder. Throws std::invalid_argument for an empty source or samples not (C, H, W).
  static Normalize fit(const SampleSource& source);

  /// The normalised copy of image (C, H, W) (or a batch (N, C, H, W)). Throws
  /// std::invalid_argument naming both when C is not the fitted channel count.
  Tensor operator()(const Tensor& image, Generator& gen) const;
  /// The same without a generator (for prediction).
  Tensor operator()(const Tensor& image) const;

  /// Means per channel.
  const std::vector<double>& mean() const { return mean_; }
  /// Standard deviations per channel.
  const std::vector<double>& stddev() const { return std_; }
  /// The checkpoint state: "mean", "std", float64 (C). Prefix the names to store them
  /// beside others (e.g. "normalize.mean").
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Rebuilds from state_dict()'s tensors (names without prefix; others ignored). Throws
  /// std::invalid_argument naming the key for a missing tensor or one that is not float64
  /// of rank 1, and as the constructor for refused values.
  static Normalize from_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  std::vector<double> mean_, std_;
};

}  // namespace tapegrad::data
