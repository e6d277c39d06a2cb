// fit() on an ImageFolder batched by a prefetching DataLoader with augmentation: the
// trained weights are the same, bit for bit, for 0 and 2 worker threads.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <memory>

#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/image_folder.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/cnn.h>
#include <tapegrad/optim/adam.h>
#include <tapegrad/train/fit.h>
#include "train/train_test_support.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

// the weights after two epochs of fit() with `workers` loader threads
std::vector<Tensor> train_weights(const std::shared_ptr<const data::ImageFolder>& folder, std::int64_t workers) {
  Generator gen(3), init(4);
  data::DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = true;
  lo.transform = data::Compose{{data::RandomCrop({8, 8}, 1), data::RandomHorizontalFlip()}};
  lo.num_workers = workers;
  data::DataLoader loader(folder, lo, gen);
  models::CNN model({.in_channels = 1, .height = 8, .width = 8, .channels = {4}, .hidden = 0, .num_classes = 2}, init);
  optim::Adam opt(model.parameters(), optim::AdamOptions{0.01});
  train::FitOptions o;
  o.epochs = 2;
  o.generator = &gen;
  const train::FitResult r = train::fit(model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o);
  REQUIRE(r.history.size() == 2);
  std::vector<Tensor> w;
  for (const Tensor& p : model.parameters()) w.push_back(p.clone());
  return w;
}

}  // namespace

TEST_CASE("fit: an ImageFolder through a prefetching loader trains the same for 0 and 2 workers", "[train][image]") {
  train_test::TempDir d;
  const fs::path fixtures = fs::path(TAPEGRAD_TESTS_DIR) / "fixtures" / "images";
  const char* files[3] = {"photo_24x16.png", "photo_24x16.jpg", "grey_24x16.jpg"};
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 5; ++i) {
      fs::create_directories(d.path / ("c" + std::to_string(c)));
      fs::copy_file(fixtures / files[(c + i) % 3], d.path / ("c" + std::to_string(c)) / (std::to_string(i) + ".img.png"));
    }
  auto folder = std::make_shared<const data::ImageFolder>(d.path.string(),
                                                          data::ImageFolderOptions{.size = {8, 8}, .channels = 1});
  REQUIRE(folder->sample_shape() == Shape{1, 8, 8});
  const std::vector<Tensor> a = train_weights(folder, 0), b = train_weights(folder, 2);
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k)
    CHECK(std::memcmp(a[k].raw_data(), b[k].raw_data(), static_cast<std::size_t>(a[k].numel()) * sizeof(float)) == 0);
}
