#pragma once
// Shared by train_fashion_mnist's tests (in-process and MPI): TAPEGRAD_REQUIRE_FASHION_MNIST()
// (Debian's dataset-fashion-mnist installed, or the test fails) and a scratch folder removed
// with its contents.
#include "../../../tests/fashion_mnist_support.h"
#include "../../../tests/temp_dir_support.h"

namespace fmnist_test {

/// A fresh folder under the system's temp folder (the library tests' own), removed with its contents.
using tapegrad::test::TempDir;

}  // namespace fmnist_test
