#pragma once
// Shared by train_fashion_mnist's tests (in-process and MPI): whether Debian's
// dataset-fashion-mnist is installed, and a scratch folder removed with its contents.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <tapegrad/data/fashion_mnist.h>

namespace fmnist_test {

/// True when the training and test image files are in data::kFashionMnistDir.
inline bool have_fashion_mnist() {
  namespace fs = std::filesystem;
  const std::string dir = tapegrad::data::kFashionMnistDir;
  return fs::exists(dir + "/train-images-idx3-ubyte.gz") && fs::exists(dir + "/t10k-images-idx3-ubyte.gz");
}

/// A fresh folder under the system's temp folder, unique per process and instance.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("tapegrad_fmnist_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace fmnist_test
