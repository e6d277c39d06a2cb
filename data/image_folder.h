#pragma once
// ImageFolder: a folder of images with one subfolder per class, as torchvision's
// datasets.ImageFolder reads it:
//   root/cat/0001.png, root/cat/0002.jpg, root/dog/a.jpeg, ...
// Classes are the subfolders' names in sorted (byte) order, class index i = classes()[i];
// samples are ordered by class, then by file name (sorted), so the order is the same on
// every machine and every run. Files with the extensions .png, .jpg, .jpeg (any case) are
// samples; other files, hidden files and deeper folders are skipped.
//
// Decoding is lazy: get(i) reads and decodes one file (data/image.h), so a folder larger
// than memory can be iterated (a SampleSource: DataLoader batches it on worker threads); load() decodes every sample into an in-memory Dataset
// (for DataLoader and train::fit). The class names travel with a checkpoint as metadata:
//   layers::save(model, "m.safetensors", {.metadata = data::class_names_metadata(folder.classes())});
//   auto names = data::class_names_from_metadata(layers::load_checkpoint_extras("m.safetensors").metadata);
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/data/image.h>
#include <tapegrad/data/sample_source.h>

namespace tapegrad::data {

/// How an ImageFolder turns files into samples.
struct ImageFolderOptions {
  /// Resize every image to (H, W) with resize() (bilinear) after decoding; empty (the
  /// default): no resize, and an image whose (C, H, W) differs from the first sample's is
  /// refused naming the file.
  Shape size{};
  /// Channels C of every sample: 0 (the default) keeps the files' channels (they must then
  /// agree); 1 converts to grey (ITU-R 601-2 luma, L = (299 R + 587 G + 114 B) / 1000, as
  /// PIL's convert("L")), 3 to RGB (grey copied, alpha dropped, as PIL's convert("RGB")).
  std::int64_t channels = 0;
  /// Per-image pixel bound passed to the decoder (see kMaxImagePixels).
  std::int64_t max_pixels = kMaxImagePixels;
};

/// A classification dataset read lazily from `root/CLASS/FILE`, see the top of this header.
class ImageFolder : public SampleSource {
 public:
  /// Lists the folder and decodes the first sample to fix sample_shape(). Throws
  /// std::runtime_error naming the folder when it is missing, is not a folder, or holds no
  /// class subfolder with an image file; std::invalid_argument for a size that is not
  /// (H, W) with H, W >= 1, channels not 0, 1 or 3, or a class name holding a newline.
  explicit ImageFolder(std::string root, ImageFolderOptions options = {});

  /// N, the number of image files.
  std::int64_t size() const override { return static_cast<std::int64_t>(files_.size()); }
  /// The class names, sorted; class index i is classes()[i].
  const std::vector<std::string>& classes() const override { return classes_; }
  /// The folder given at construction.
  const std::string& root() const { return root_; }
  /// The options given at construction.
  const ImageFolderOptions& options() const { return options_; }
  /// Path of sample i (0 <= i < size()). Throws std::out_of_range naming i and N.
  const std::string& path(std::int64_t i) const;
  /// Class index of sample i. Throws std::out_of_range naming i and N.
  std::int64_t target(std::int64_t i) const override;
  /// Every sample's class index, in sample order.
  const std::vector<std::int64_t>& targets() const { return targets_; }
  /// (C, H, W) of every sample: the first file's, after options (size, channels).
  const Shape& sample_shape() const override { return sample_shape_; }

  /// Sample i decoded: float32 (C, H, W) in [0, 1]. Throws std::out_of_range for a bad i,
  /// std::runtime_error naming the file when it cannot be read or decoded, or when its
  /// shape is not sample_shape() (naming both; after the resize and channel conversion
  /// that options ask for).
  Tensor get(std::int64_t i) const override;
  /// The samples at `indices` decoded, in that order: X (B, C, H, W) float32, y (B) int64,
  /// class_names = classes(). Throws as get().
  Dataset load(const std::vector<std::int64_t>& indices) const;
  /// Every sample decoded into one in-memory Dataset (X (N, C, H, W), y (N), class_names).
  Dataset load() const;

 private:
  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<std::int64_t> targets_;
  Shape sample_shape_;
};

/// One file as an ImageFolder with `options` gives it: decoded (read_image8), converted to
/// options.channels, resized to options.size; float32 (C, H, W) in [0, 1]. What a
/// prediction program reads an image with. Throws as read_image8, std::invalid_argument for
/// options ImageFolder refuses.
Tensor read_image(const std::string& path, const ImageFolderOptions& options);

/// PIL's convert("L") (channels 1: the luma of R, G, B, alpha dropped) or convert("RGB")
/// (channels 3: grey copied, alpha dropped); 0 or the image's own count: unchanged.
/// Throws std::invalid_argument for other channel counts.
Image8 convert_channels(const Image8& image, std::int64_t channels);

/// Bilinear resize of a float32 image (C, H, W) to (C, size[0], size[1]), as PyTorch's
/// interpolate(mode="bilinear", align_corners=False, antialias=False): output pixel
/// (y, x) samples the input at ((y + 0.5) · H / H' - 0.5, (x + 0.5) · W / W' - 0.5),
/// clamped at the borders. Throws std::invalid_argument naming the shapes for an image that
/// is not float32 (C, H, W) or a size that is not (H', W') with H', W' >= 1.
Tensor resize(const Tensor& image, const Shape& size);

/// Metadata key under which class_names_metadata stores the class names.
inline constexpr const char* kClassNamesKey = "class_names";

/// {"class_names": the names joined by '\n'}: checkpoint metadata (layers::SaveOptions).
/// Throws std::invalid_argument for an empty list or a name that is empty or holds '\n'.
std::map<std::string, std::string> class_names_metadata(const std::vector<std::string>& names);

/// The class names stored by class_names_metadata. Throws std::invalid_argument when the
/// key is missing (naming it) or a name is empty.
std::vector<std::string> class_names_from_metadata(const std::map<std::string, std::string>& metadata);

}  // namespace tapegrad::data
