#pragma once
// Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747): 60,000 training and
// 10,000 test 28×28 grey-scale images of 10 clothing classes, stored as IDX files.
// Debian ships them in the package dataset-fashion-mnist.
#include <array>
#include <cstdint>
#include <string>

#include <tapegrad/data/dataset.h>

namespace tapegrad::data {

/// Where Debian's dataset-fashion-mnist installs the gzip IDX files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
/// Classes of Fashion-MNIST (T-shirt/top ... ankle boot).
inline constexpr std::int64_t kFashionMnistClasses = 10;
/// Pixels per image: 28 × 28 = 784.
inline constexpr std::int64_t kFashionMnistPixels = 28 * 28;

/// "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
/// "Bag", "Ankle boot" (label order of the dataset).
const std::array<const char*, 10>& fashion_mnist_classes();

/// Loads the training ("train-*") or test ("t10k-*") split from `dir`, accepting
/// "<name>-idx3-ubyte.gz" or the uncompressed "<name>-idx3-ubyte". Returns X (N, 784)
/// float32 with pixels scaled to [0, 1] (like torchvision's ToTensor) and y (N) int64.
/// `limit` > 0 keeps only the first `limit` samples (all when there are fewer); 0 keeps
/// all; a negative limit throws std::invalid_argument.
/// For a CNN, view the images as (N, 1, 28, 28): load_fashion_mnist(dir, true).reshaped({1, 28, 28}).
/// Throws std::runtime_error: when a file is missing (the message names the path and says
/// to install the Debian package dataset-fashion-mnist or pass another directory), on any
/// IDX format error (file and byte offset), when images are not (N, 28, 28) uint8, labels
/// not (N) uint8, the counts differ, or a label is outside 0..9.
Dataset load_fashion_mnist(const std::string& dir, bool train, std::int64_t limit = 0);

}  // namespace tapegrad::data
