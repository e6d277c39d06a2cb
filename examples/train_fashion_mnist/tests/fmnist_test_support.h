#pragma once
// Shared by train_fashion_mnist's tests (in-process and MPI): whether Debian's
// dataset-fashion-mnist is installed, and a scratch folder removed with its contents.
#include <filesystem>
#include <string>

#include <tapegrad/data/fashion_mnist.h>

#include "../../../tests/temp_dir_support.h"

namespace fmnist_test {

/// True when the training and test image files are in data::kFashionMnistDir.
inline bool have_fashion_mnist() {
  namespace fs = std::filesystem;
  const std::string dir = tapegrad::data::kFashionMnistDir;
  return fs::exists(dir + "/train-images-idx3-ubyte.gz") && fs::exists(dir + "/t10k-images-idx3-ubyte.gz");
}

/// A fresh folder under the system's temp folder (the library tests' own), removed with its contents.
using tapegrad::test::TempDir;

}  // namespace fmnist_test
