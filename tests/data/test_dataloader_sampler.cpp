// DataLoader with a sampler (DataLoaderOptions::sampler): the batches follow the sampler's
// indices (distributed::DistributedSampler: each rank's share), set_epoch reaches the
// sampler, the batches are the same bit for bit for 0, 1 and 2 workers, shuffle and a
// sampler together are refused, and without a sampler the order is what it was.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/sampler.h>
#if __has_include(<tapegrad/distributed/distributed_sampler.h>)
#include <tapegrad/distributed/distributed_sampler.h>
#define TAPEGRAD_TEST_DISTRIBUTED_SAMPLER 1
#endif

using namespace tapegrad;
using namespace tapegrad::data;
using Catch::Matchers::Contains;

namespace {

// N images (N, 1, 2, 3) whose pixels all hold the sample's index i, targets i (int64).
Dataset indexed_images(std::int64_t n) {
  std::vector<double> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 6; ++k) x.push_back(static_cast<double>(i) + 0.125 * k);
    y.push_back(i);
  }
  return Dataset::make(Tensor::from_vector(x, {n, 1, 2, 3}), Tensor::from_int64(y, {n}));
}

// The targets of every batch of the current epoch, in order (the sample indices).
std::vector<std::int64_t> epoch_targets(DataLoader& loader) {
  std::vector<std::int64_t> out;
  for (const Batch& b : loader)
    for (std::int64_t r = 0; r < b.size(); ++r) out.push_back(b.y.data<std::int64_t>()[r]);
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// A sampler that gives a fixed list every epoch (size() may be set to disagree with it).
class FixedSampler : public Sampler {
 public:
  explicit FixedSampler(std::vector<std::int64_t> idx, std::int64_t size = -1)
      : idx_(std::move(idx)), size_(size < 0 ? static_cast<std::int64_t>(idx_.size()) : size) {}
  std::int64_t size() const override { return size_; }
  std::vector<std::int64_t> epoch_indices() override { return idx_; }
  void set_epoch(std::int64_t e) override { epoch = e; }
  std::int64_t epoch = -1;

 private:
  std::vector<std::int64_t> idx_;
  std::int64_t size_;
};

}  // namespace

TEST_CASE("DataLoader batches a sampler's indices in order, and forwards set_epoch", "[data][loader][sampler]") {
  const Dataset ds = indexed_images(10);
  auto s = std::make_shared<FixedSampler>(std::vector<std::int64_t>{7, 3, 3, 9, 0});
  DataLoader loader(ds, {.batch_size = 2, .sampler = s});
  CHECK(loader.size() == 5);
  CHECK(loader.dataset_size() == 10);
  CHECK(loader.num_batches() == 3);
  CHECK(&loader.sampler() == s.get());
  loader.set_epoch(4);
  CHECK(s->epoch == 4);
  CHECK(epoch_targets(loader) == std::vector<std::int64_t>{7, 3, 3, 9, 0});
  loader.reset();
  const Batch last = loader.batch(2);
  REQUIRE(last.size() == 1);
  CHECK(last.X.data<float>()[5] == 0.625f);  // sample 0's last pixel
  const Batch mid = loader.batch(1, 1, 1);    // a row range: sample 9
  CHECK(mid.y.data<std::int64_t>()[0] == 9);
  CHECK(mid.X.data<float>()[0] == 9.0f);
}

TEST_CASE("DataLoader: a batch size up to INT64_MAX gives one batch of every row", "[data][loader]") {
  // num_batches rounded up with n + b - 1, which overflowed for such a b: 0 batches (fit: "the
  // loader has no batches").
  const Dataset ds = indexed_images(36);
  for (const std::int64_t b : {std::int64_t{36}, std::int64_t{1} << 62, INT64_MAX - 1, INT64_MAX}) {
    DataLoader loader(ds, {.batch_size = b});
    CHECK(loader.num_batches() == 1);
    const Batch all = loader.batch(0);
    CHECK(all.size() == 36);
    CHECK(all.y.data<std::int64_t>()[35] == 35);
  }
  DataLoader dropped(ds, {.batch_size = INT64_MAX, .drop_last = true});
  CHECK(dropped.num_batches() == 0);
  CHECK(ceil_div(0, INT64_MAX) == 0);
  CHECK(ceil_div(INT64_MAX, 2) == (INT64_MAX / 2) + 1);
  CHECK(ceil_div(36, 5) == 8);
}

#ifdef TAPEGRAD_TEST_DISTRIBUTED_SAMPLER
TEST_CASE("DataLoader with a DistributedSampler batches each rank's indices", "[data][loader][sampler]") {
  const Dataset ds = indexed_images(10);
  // without shuffling: 0..9 padded with 0, 1 to 12, rank r takes positions r, r + 3, ...
  const std::vector<std::vector<std::int64_t>> plain{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  std::vector<std::int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    auto plain_s = std::make_shared<distributed::DistributedSampler>(10, 3, r, distributed::DistributedSamplerOptions{.shuffle = false});
    DataLoader a(ds, {.batch_size = 3, .sampler = plain_s});
    CHECK(a.size() == 4);
    CHECK(a.num_batches() == 2);
    CHECK(epoch_targets(a) == plain[static_cast<std::size_t>(r)]);

    auto s = std::make_shared<distributed::DistributedSampler>(10, 3, r, distributed::DistributedSamplerOptions{.seed = 5});
    DataLoader b(ds, {.batch_size = 3, .sampler = s});
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      b.set_epoch(epoch);
      const std::vector<std::int64_t> got = epoch_targets(b);
      CHECK(got == s->indices());
      CHECK(b.order() == s->indices());
      if (epoch == 0) seen.insert(seen.end(), got.begin(), got.end());
    }
  }
  // the three shares of epoch 0 cover all 10 samples (12 indices: 2 repeated by the padding)
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen.size() == 12);
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  std::vector<std::int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

TEST_CASE("DataLoader::set_epoch reshuffles a DistributedSampler's share", "[data][loader][sampler]") {
  const Dataset ds = indexed_images(40);
  auto s = std::make_shared<distributed::DistributedSampler>(40, 2, 1, distributed::DistributedSamplerOptions{.seed = 11});
  DataLoader loader(ds, {.batch_size = 8, .sampler = s});
  loader.set_epoch(0);
  const std::vector<std::int64_t> e0 = epoch_targets(loader);
  const std::vector<std::int64_t> again = epoch_targets(loader);  // no set_epoch: the same epoch again
  loader.set_epoch(1);
  const std::vector<std::int64_t> e1 = epoch_targets(loader);
  loader.set_epoch(0);
  CHECK(e0.size() == 20);
  CHECK(again == e0);
  CHECK(e1 != e0);
  CHECK(epoch_targets(loader) == e0);
  CHECK(s->epoch() == 0);
}

TEST_CASE("DataLoader with a DistributedSampler gives the same batches for 0, 1 and 2 workers",
          "[data][loader][sampler][workers]") {
  const Dataset ds = indexed_images(23);
  std::vector<std::vector<Batch>> runs;
  for (std::int64_t workers : {0, 1, 2}) {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.num_workers = workers;
    o.transform.transforms.push_back(RandomHorizontalFlip());
    o.sampler = std::make_shared<distributed::DistributedSampler>(23, 2, 0, distributed::DistributedSamplerOptions{.seed = 3});
    Generator gen(17);
    DataLoader loader(ds, o, gen);
    std::vector<Batch> batches;
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
      loader.set_epoch(epoch);
      for (const Batch& b : loader) batches.push_back(b);
    }
    runs.push_back(std::move(batches));
  }
  REQUIRE(runs[0].size() == 9);  // 12 samples a rank: 3 batches, 3 epochs
  std::int64_t flipped = 0;
  for (const Batch& b : runs[0])
    for (std::int64_t r = 0; r < b.size(); ++r) flipped += b.X.data<float>()[r * 6] != static_cast<float>(b.y.data<std::int64_t>()[r]);
  CHECK(flipped > 0);  // the transform ran: some rows start with their last column
  for (std::size_t w = 1; w < runs.size(); ++w) {
    REQUIRE(runs[w].size() == runs[0].size());
    for (std::size_t k = 0; k < runs[0].size(); ++k) {
      CHECK(same_bits(runs[w][k].X, runs[0][k].X));
      CHECK(same_bits(runs[w][k].y, runs[0][k].y));
    }
  }
}

TEST_CASE("DataLoader refuses a DistributedSampler made for another dataset size", "[data][loader][sampler][errors]") {
  auto s = std::make_shared<distributed::DistributedSampler>(12, 2, 0);
  CHECK_THROWS_MATCHES(DataLoader(indexed_images(10), {.batch_size = 2, .sampler = s}), std::invalid_argument,
                       Catch::Matchers::Message("DataLoader: the sampler was made for a dataset of 12 samples, this one has 10"));
}
#endif

TEST_CASE("DataLoader: shuffle and a sampler are mutually exclusive", "[data][loader][sampler][errors]") {
  auto s = std::make_shared<SequentialSampler>(10);
  CHECK_THROWS_MATCHES(DataLoader(indexed_images(10), {.batch_size = 2, .shuffle = true, .sampler = s}),
                       std::invalid_argument,
                       Catch::Matchers::Message("DataLoader: shuffle and sampler are mutually exclusive: got shuffle = "
                                                "true and a sampler (the sampler orders the indices; shuffle through "
                                                "it, e.g. DistributedSamplerOptions::shuffle)"));
  CHECK_NOTHROW(DataLoader(indexed_images(10), {.batch_size = 2, .shuffle = false, .sampler = s}));
}

TEST_CASE("DataLoader checks a sampler's epoch: indices in range, its size, an epoch started",
          "[data][loader][sampler][errors]") {
  const Dataset ds = indexed_images(10);
  DataLoader before(ds, {.batch_size = 2, .sampler = std::make_shared<FixedSampler>(std::vector<std::int64_t>{1, 2})});
  CHECK_THROWS_MATCHES(before.batch(0), std::logic_error,
                       Catch::Matchers::Message("DataLoader::batch: no epoch started: call reset() (or begin()) first, "
                                                "which takes the epoch's order from the sampler"));
  DataLoader outside(ds, {.batch_size = 2, .sampler = std::make_shared<FixedSampler>(std::vector<std::int64_t>{1, 10, 2})});
  CHECK_THROWS_MATCHES(outside.reset(), std::out_of_range,
                       Catch::Matchers::Message("DataLoader: the sampler's index 10 (position 1 of the epoch) is "
                                                "outside 0 .. 9 (the dataset's 10 samples)"));
  DataLoader miscounted(ds, {.batch_size = 2, .sampler = std::make_shared<FixedSampler>(std::vector<std::int64_t>{1, 2}, 3)});
  CHECK_THROWS_MATCHES(miscounted.reset(), std::logic_error,
                       Catch::Matchers::Message("DataLoader: the sampler gave 2 indices for the epoch, expected its size() 3"));
  CHECK_THROWS_WITH(SequentialSampler(-1), Contains("SequentialSampler: expected a dataset size >= 0, got -1"));
}

TEST_CASE("DataLoader without a sampler: randperm from the generator each epoch, set_epoch ignored",
          "[data][loader][sampler]") {
  const Dataset ds = indexed_images(30);
  Generator gen(21), twin(21);
  DataLoader loader(ds, {.batch_size = 7, .shuffle = true}, gen);
  std::vector<std::int64_t> first(30);
  std::iota(first.begin(), first.end(), 0);
  CHECK(loader.order() == first);  // 0..N-1 until the first reset, nothing drawn
  CHECK(loader.size() == 30);
  for (int epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(100 + epoch);
    CHECK(epoch_targets(loader) == randperm(30, twin));
  }
  DataLoader plain(ds, {.batch_size = 7}, gen);
  plain.set_epoch(5);
  CHECK(epoch_targets(plain) == first);
  RandomSampler rs(30, twin);
  Generator twin2(21);
  for (int k = 0; k < 3; ++k) randperm(30, twin2);
  CHECK(rs.epoch_indices() == randperm(30, twin2));
}
