#pragma once
// Shared by train_fashion_mnist's tests (in-process and MPI): TAPEGRAD_REQUIRE_FASHION_MNIST()
// (Debian's dataset-fashion-mnist installed, or the test fails), a scratch folder removed
// with its contents, and the short runs the tests train.
#include <cstdint>
#include <string>

#include "../../../tests/fashion_mnist_support.h"
#include "../../../tests/temp_dir_support.h"
#include "trainer.h"

namespace fmnist_test {

/// A fresh folder under the system's temp folder (the library tests' own), removed with its contents.
using tapegrad::test::TempDir;

/// A short quiet run: 2 epochs of batch 64 on the first `limit` training images (a tenth of
/// them for validation), seeded with `seed`, writing `checkpoint` when one is named.
inline fmnist::Config short_run(std::int64_t limit, std::uint64_t seed, const std::string& checkpoint = "") {
  fmnist::Config c;
  c.limit = limit;
  c.epochs = 2;
  c.batch_size = 64;
  c.progress = false;
  c.seed = seed;
  c.checkpoint = checkpoint;
  return c;
}

}  // namespace fmnist_test
