#include <tapegrad/data/fashion_mnist.h>

#include <filesystem>
#include <stdexcept>

#include <tapegrad/data/idx.h>

namespace tapegrad::data {
namespace {

// The gzip file, else the uncompressed one; throws with the install hint if neither exists.
std::string find_file(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(dir) / (name + ".gz");
  const fs::path plain = fs::path(dir) / name;
  std::error_code ec;
  if (fs::is_regular_file(gz, ec)) return gz.string();
  if (fs::is_regular_file(plain, ec)) return plain.string();
  throw std::runtime_error("Fashion-MNIST: " + gz.string() + " not found (nor " + plain.string() +
                           "); install the Debian package dataset-fashion-mnist "
                           "(apt-get install dataset-fashion-mnist) or pass the directory holding the IDX files");
}

}  // namespace

const std::array<const char*, 10>& fashion_mnist_classes() {
  static const std::array<const char*, 10> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

Dataset load_fashion_mnist(const std::string& dir, bool train, std::int64_t limit) {
  if (limit < 0)  // 0 means all; a negative count would silently mean all too
    throw std::invalid_argument("load_fashion_mnist: limit must be >= 0 (0: all samples), got " + std::to_string(limit));
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  if (images.type != IdxType::UInt8 || images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28)
    throw std::runtime_error("Fashion-MNIST: " + images_path + ": expected (N, 28, 28) uint8 images, got " +
                             shape_str(images.dims) + " " + idx_type_name(images.type));
  if (labels.type != IdxType::UInt8 || labels.dims.size() != 1)
    throw std::runtime_error("Fashion-MNIST: " + labels_path + ": expected (N) uint8 labels, got " +
                             shape_str(labels.dims) + " " + idx_type_name(labels.type));
  if (labels.dims[0] != images.dims[0])
    throw std::runtime_error("Fashion-MNIST: " + images_path + " holds " + std::to_string(images.dims[0]) +
                             " images but " + labels_path + " holds " + std::to_string(labels.dims[0]) + " labels");
  const std::int64_t n = images.dims[0];
  for (std::int64_t i = 0; i < n; ++i)
    if (labels.payload[static_cast<std::size_t>(i)] >= kFashionMnistClasses)
      throw std::runtime_error("Fashion-MNIST: " + labels_path + ": label " +
                               std::to_string(labels.payload[static_cast<std::size_t>(i)]) + " at index " +
                               std::to_string(i) + " (byte offset " + std::to_string(8 + i) +
                               ") is outside 0..9");
  Tensor X = images.to_float32(1.0 / 255.0);
  Tensor y = labels.to_int64();
  Dataset full = Dataset::make(alias_with_shape(X, {n, kFashionMnistPixels}), y);
  if (limit > 0 && limit < n) return full.slice(0, limit);
  return full;
}

}  // namespace tapegrad::data
