#include "kit/fashion_data.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/fashion_mnist.h>

namespace studies::kit {

using namespace tapegrad;

void check_sizes(std::int64_t train_size, std::int64_t test_size) {
  if (train_size < 1 || train_size > 60000)
    throw std::invalid_argument("--train-size: expected 1..60000 (the Fashion-MNIST training images), got " +
                                std::to_string(train_size));
  if (test_size < 0 || test_size > 10000)
    throw std::invalid_argument("--test-size: expected 0 (all) .. 10000 (the Fashion-MNIST test images), got " +
                                std::to_string(test_size));
}

StudyData load_data(const std::string& dir, std::int64_t train_size, std::int64_t test_size,
                    std::uint64_t subset_seed) {
  check_sizes(train_size, test_size);
  data::Dataset full = data::load_fashion_mnist(dir, true);
  data::Dataset test = data::load_fashion_mnist(dir, false, test_size);
  if (train_size > full.size())
    throw std::invalid_argument("--train-size: expected 1.." + std::to_string(full.size()) + " (the images in " + dir +
                                "), got " + std::to_string(train_size));
  if (test_size > test.size())
    throw std::invalid_argument("--test-size: expected 0 (all) .. " + std::to_string(test.size()) +
                                " (the test images in " + dir + "), got " + std::to_string(test_size));
  Generator g(subset_seed);
  std::vector<std::int64_t> perm = data::randperm(full.size(), g);
  perm.resize(static_cast<std::size_t>(train_size));
  std::sort(perm.begin(), perm.end());
  data::Dataset train = full.take(perm);
  const auto st = data::Standardizer::fit(train.X, data::Standardizer::Scope::Global);
  return {st.transform(train), st.transform(test)};
}

data::DataLoader shuffled_batches(const data::Dataset& train, std::int64_t batch, Generator& shuffle) {
  data::DataLoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = true;
  lo.drop_last = true;
  return data::DataLoader(train, lo, shuffle);
}

}  // namespace studies::kit
