// DataLoader over a SampleSource with transforms and worker threads: the same batches bit
// for bit for 0, 1 and 2 workers, a worker's exception reaching the caller, and a loader
// destroyed (or reset) mid-epoch.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/image_folder.h>
#include "test_errors_support.h"
#include "image_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using TmpFolder = tapegrad::test::ImageDir;

// 3 classes x 4 images of (3, 16, 24): PNG, baseline and progressive JPEG
void fill(const TmpFolder& d) {
  const char* files[3] = {"photo_24x16.png", "photo_24x16.jpg", "photo_24x16_progressive.jpg"};
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i)
      d.put("class" + std::to_string(c) + "/" + std::to_string(i) + (i % 3 == 0 ? ".png" : ".jpg"), files[(c + i) % 3]);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// Every batch of `epochs` epochs, for a loader with `workers` threads.
std::vector<Batch> run(std::shared_ptr<const SampleSource> src, std::int64_t workers, int epochs = 2) {
  Generator gen(11);
  DataLoaderOptions o;
  o.batch_size = 5;
  o.shuffle = true;
  o.transform = Compose{{RandomCrop({16, 16}, 2), RandomHorizontalFlip()}};
  o.num_workers = workers;
  DataLoader loader(std::move(src), o, gen);
  std::vector<Batch> all;
  for (int e = 0; e < epochs; ++e)
    for (Batch b : loader) all.push_back(b);
  return all;
}

}  // namespace

TEST_CASE("DataLoader workers: the same augmented batches, bit for bit, for 0, 1 and 2 workers", "[data][image]") {
  TmpFolder d;
  fill(d);
  auto folder = std::make_shared<ImageFolder>(d.path.string());
  const std::vector<Batch> ref = run(folder, 0);
  REQUIRE(ref.size() == 6);  // 2 epochs of ceil(12 / 5)
  REQUIRE(ref[0].X.shape() == Shape{5, 3, 16, 16});
  REQUIRE(ref[2].X.shape() == Shape{2, 3, 16, 16});
  CHECK(!same_bits(ref[0].X, ref[3].X));  // epoch 2: another order and other crops
  for (std::int64_t w : {1, 2}) {
    const std::vector<Batch> got = run(folder, w);
    REQUIRE(got.size() == ref.size());
    for (std::size_t k = 0; k < ref.size(); ++k) {
      INFO("workers " << w << ", batch " << k);
      CHECK(same_bits(got[k].X, ref[k].X));
      CHECK(same_bits(got[k].y, ref[k].y));
    }
  }
  // the targets follow the samples: each batch's labels are the folder's for its order
  Generator gen(11);
  DataLoader plain(folder, {.batch_size = 12, .shuffle = true}, gen);
  plain.reset();
  const Batch b = plain.batch(0);
  for (std::int64_t r = 0; r < 12; ++r) CHECK(b.y.data<std::int64_t>()[r] == folder->target(plain.order()[r]));
}

TEST_CASE("DataLoader workers: in-memory images with a transform, batches out of order", "[data][image]") {
  TmpFolder d;
  fill(d);
  const Dataset ds = ImageFolder(d.path.string()).load();
  auto make = [&](std::int64_t w, Generator& g) {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.transform = Compose{{CenterCrop({8, 8}), RandomHorizontalFlip()}};
    o.num_workers = w;
    return DataLoader(ds, o, g);
  };
  Generator g0(5), g2(5);
  DataLoader a = make(0, g0), b = make(2, g2);
  a.reset();
  b.reset();
  // asked out of order, and twice: built on the caller, still the same bits
  for (std::int64_t i : {1, 0, 2, 2}) {
    const Batch x = a.batch(i), y = b.batch(i);
    CHECK(same_bits(x.X, y.X));
    CHECK(same_bits(x.y, y.y));
  }
  CHECK(a.batch(0).X.shape() == Shape{4, 3, 8, 8});
  // without a transform the generator is not drawn from (the order alone, as before)
  Generator g(1), copy(1);
  DataLoader plain(ds, {.batch_size = 4, .shuffle = true, .num_workers = 1}, g);
  plain.reset();
  CHECK(plain.order() == randperm(12, copy));
  CHECK(g.next_u64() == copy.next_u64());
}

TEST_CASE("DataLoader workers: a worker's exception reaches the caller at its batch", "[data][image][errors]") {
  TmpFolder d;
  fill(d);
  d.put("class1/9.png", "truncated.png");  // sample 8 of 13: batch 1 with batch size 5
  auto folder = std::make_shared<ImageFolder>(d.path.string());
  for (std::int64_t w : {0, 1, 2}) {
    Generator gen(0);
    DataLoader loader(folder, {.batch_size = 5, .num_workers = w}, gen);
    loader.reset();
    CHECK(loader.batch(0).size() == 5);
    CHECK_THAT(test::thrown<std::runtime_error>([&] { loader.batch(1); }),
               Contains((d.path / "class1" / "9.png").string()) && Contains("truncated PNG file"));
    CHECK(loader.batch(2).size() == 3);  // the workers went on
  }
  // a transform that throws: the first batch rethrows it, on the caller's thread
  Generator gen(0);
  DataLoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 2;
  o.transform = Compose{{[](const Tensor&, Generator&) -> Tensor { throw std::invalid_argument("transform refused"); }}};
  DataLoader bad(std::make_shared<ImageFolder>(d.path.string()), o, gen);
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { bad.reset(), bad.batch(0); }), Contains("transform refused"));
}

TEST_CASE("DataLoader workers: destroyed or reset mid-epoch, the threads stop and join", "[data][image]") {
  TmpFolder d;
  fill(d);
  auto folder = std::make_shared<ImageFolder>(d.path.string());
  auto calls = std::make_shared<std::atomic<int>>(0);
  DataLoaderOptions o;
  o.batch_size = 1;
  o.num_workers = 2;
  o.prefetch_factor = 1;
  o.transform = Compose{{[calls](const Tensor& x, Generator&) {
    ++*calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return x;
  }}};
  {
    Generator gen(0);
    DataLoader loader(folder, o, gen);
    loader.reset();
    CHECK(loader.batch(0).size() == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // bounded queue: at most num_workers · prefetch_factor batches past the one taken
    CHECK(*calls <= 1 + 2);
    loader.reset();  // mid-epoch: the workers of the old epoch are joined first
    CHECK(loader.batch(0).size() == 1);
  }  // destroyed with batches in flight: joins, no hang
  const int after = *calls;
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(*calls == after);  // nothing runs after the destructor returned
  CHECK(after < 12);
}

TEST_CASE("DataLoader: bad worker options and sources are refused naming the value", "[data][errors]") {
  using test::thrown;
  const Dataset ds = Dataset::make(Tensor::zeros({4, 2}), Tensor::from_int64({0, 1, 0, 1}, {4}));
  CHECK_THAT(thrown<std::invalid_argument>([&] { DataLoader(ds, {.num_workers = -1}); }),
             Contains("num_workers >= 0, got -1"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { DataLoader(ds, {.prefetch_factor = 0}); }),
             Contains("prefetch_factor >= 1, got 0"));
  DataLoaderOptions o;
  o.transform = Compose{{RandomHorizontalFlip()}};
  CHECK_THAT(thrown<std::invalid_argument>([&] { DataLoader(ds, o); }), Contains("(N, C, H, W), got X of rank 2"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { DataLoader(Dataset{}, o); }), Contains("got an empty dataset"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { DataLoader(std::shared_ptr<const SampleSource>(), {}); }),
             Contains("source is null"));
}

TEST_CASE("Subset: a part of a source by index, checked", "[data][image]") {
  TmpFolder d;
  fill(d);
  auto folder = std::make_shared<ImageFolder>(d.path.string());
  const Subset s(folder, {11, 0});
  CHECK(s.size() == 2);
  CHECK(s.target(0) == 2);
  CHECK(s.target(1) == 0);
  CHECK(same_bits(s.get(0), folder->get(11)));
  CHECK(s.classes() == folder->classes());
  CHECK_THAT(test::thrown<std::out_of_range>([&] { Subset(folder, {3, 12}); }),
             Contains("index 12 (entry 1) outside 0 .. 11"));
  CHECK_THAT(test::thrown<std::out_of_range>([&] { s.get(2); }), Contains("sample 2 outside 0 .. 1"));
}
