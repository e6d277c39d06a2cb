#pragma once
// The Fashion-MNIST data of norm_study and claims: a fixed random training subset and the
// test images, standardised with the training part's global mean and std.
#include <cstdint>
#include <string>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/dataset.h>

namespace studies::kit {

/// Fashion-MNIST, standardised with the training part's global mean and std.
struct StudyData {
  tapegrad::data::Dataset train, test;
};
/// `train_size` training images drawn at random (Generator(subset_seed), fixed across runs)
/// from the 60,000, all 10,000 test images (or the first `test_size` when > 0).
/// Throws std::runtime_error when the files are missing (names the Debian package),
/// std::invalid_argument naming --train-size or --test-size when it is out of range
/// (check_sizes) or exceeds the images the files hold.
StudyData load_data(const std::string& dir, std::int64_t train_size, std::int64_t test_size,
                    std::uint64_t subset_seed = 1234);

/// The loader the Fashion-MNIST studies train with: `train` in batches of `batch`, reshuffled
/// every epoch by `shuffle` (which must outlive the loader), the remainder dropped.
tapegrad::data::DataLoader shuffled_batches(const tapegrad::data::Dataset& train, std::int64_t batch,
                                            tapegrad::Generator& shuffle);

/// Throws std::invalid_argument naming the option: --train-size < 1 or above 60,000,
/// --test-size < 0 or above 10,000 (0 means all).
void check_sizes(std::int64_t train_size, std::int64_t test_size);

}  // namespace studies::kit
