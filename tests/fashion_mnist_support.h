#pragma once
// Tests that read Fashion-MNIST (Debian's dataset-fashion-mnist, which scripts/setup.sh
// installs) fail without it rather than pass untested (skip_support.h).
#include <filesystem>
#include <string>

#include <tapegrad/data/fashion_mnist.h>

#include "skip_support.h"

namespace tapegrad::test {

/// True when the training and test files of Fashion-MNIST are in data::kFashionMnistDir.
inline bool have_fashion_mnist() {
  namespace fs = std::filesystem;
  const std::string dir = tapegrad::data::kFashionMnistDir;
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"})
    if (!fs::exists(dir + "/" + f)) return false;
  return true;
}

}  // namespace tapegrad::test

/// At the top of a test case that reads Fashion-MNIST: TAPEGRAD_MISSING naming the folder and
/// the package when the files are not there.
#define TAPEGRAD_REQUIRE_FASHION_MNIST()                                                                 \
  do {                                                                                                   \
    if (!::tapegrad::test::have_fashion_mnist())                                                         \
      TAPEGRAD_MISSING("Fashion-MNIST not in " << ::tapegrad::data::kFashionMnistDir                     \
                                               << ": install dataset-fashion-mnist (scripts/setup.sh)"); \
  } while (0)
