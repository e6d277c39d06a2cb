// A DataLoader with a DistributedSampler under `mpirun -np 2` ("[sampler_np2]"): each rank
// decodes only its own share, on prefetching worker threads, the shares are disjoint and
// cover the dataset (with PyTorch's padding when N is odd), the workers stop cleanly when a
// loader is dropped mid-epoch, and train::fit over such loaders gives the same bits for 0
// and 2 workers and the single-process run over the same global batches (up to rounding).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include <tapegrad/data/dataloader.h>
#include <tapegrad/distributed/distributed_sampler.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/train/data_parallel.h>
#include <tapegrad/train/fit.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {

// N samples (1, 2, 2) holding their index, target = index; counts every get() per sample
// (called from the loader's worker threads).
class CountingSource : public data::SampleSource {
 public:
  explicit CountingSource(std::int64_t n) : shape_{1, 2, 2}, gets_(static_cast<std::size_t>(n)) {}
  std::int64_t size() const override { return static_cast<std::int64_t>(gets_.size()); }
  const Shape& sample_shape() const override { return shape_; }
  Tensor get(std::int64_t i) const override {
    gets_[static_cast<std::size_t>(i)].fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // a decode's worth of time
    const double v = static_cast<double>(i);
    return Tensor::from_vector({v, v, v, v}, shape_);
  }
  std::int64_t target(std::int64_t i) const override { return i; }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::int64_t gets(std::int64_t i) const { return gets_[static_cast<std::size_t>(i)].load(); }
  std::int64_t total_gets() const {
    std::int64_t t = 0;
    for (const auto& g : gets_) t += g.load();
    return t;
  }
  void clear() const {
    for (auto& g : gets_) g.store(0);
  }

 private:
  Shape shape_;
  std::vector<std::string> classes_;
  mutable std::vector<std::atomic<std::int64_t>> gets_;
};

// Every rank's list of n indices (rank 0's first).
std::vector<std::int64_t> gather_indices(const std::vector<std::int64_t>& mine) {
  std::vector<double> in(mine.begin(), mine.end()), out(in.size() * static_cast<std::size_t>(dist::world_size()));
  dist::allgather(in.data(), static_cast<std::int64_t>(in.size()), out.data());
  return std::vector<std::int64_t>(out.begin(), out.end());
}

// One epoch's targets (sample indices), in batch order.
std::vector<std::int64_t> epoch_targets(data::DataLoader& loader) {
  std::vector<std::int64_t> out;
  for (const data::Batch& b : loader)
    for (std::int64_t r = 0; r < b.size(); ++r) out.push_back(b.y.data<std::int64_t>()[r]);
  return out;
}

}  // namespace

TEST_CASE("2 ranks with a DistributedSampler decode disjoint shares covering the dataset on prefetching workers",
          "[sampler_np2]") {
  REQUIRE(dist::world_size() == 2);
  const int rank = dist::rank();
  for (const std::int64_t n : {std::int64_t{14}, std::int64_t{13}}) {  // even, then padded
    auto source = std::make_shared<CountingSource>(n);
    auto sampler = std::make_shared<dist::DistributedSampler>(n, 2, rank, dist::DistributedSamplerOptions{.seed = 9});
    data::DataLoaderOptions o;
    o.batch_size = 3;
    o.num_workers = 2;
    o.prefetch_factor = 2;
    o.sampler = sampler;
    data::DataLoader loader(source, o);
    REQUIRE(loader.size() == 7);
    std::vector<std::int64_t> first;
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      source->clear();
      loader.set_epoch(epoch);
      const std::vector<std::int64_t> mine = epoch_targets(loader);
      CHECK(mine == sampler->indices());
      // this rank decoded its share only, each sample as often as the share holds it
      for (std::int64_t i = 0; i < n; ++i)
        CHECK(source->gets(i) == std::count(mine.begin(), mine.end(), i));
      std::vector<std::int64_t> all = gather_indices(mine);
      REQUIRE(all.size() == 14);
      std::sort(all.begin(), all.end());
      std::vector<std::int64_t> expected(static_cast<std::size_t>(n));
      std::iota(expected.begin(), expected.end(), 0);
      if (n == 13) {  // the padding repeats the permutation's head: one sample twice
        const std::vector<std::int64_t> head = gather_indices({sampler->indices().front()});
        expected.push_back(head[0]);  // rank 0's first index is position 0 of the permutation
        std::sort(expected.begin(), expected.end());
      }
      CHECK(all == expected);
      if (epoch == 0) first = mine;
      else CHECK(mine != first);  // set_epoch reshuffled
    }
  }
  dist::barrier();
}

TEST_CASE("2 ranks: a prefetching loader with a DistributedSampler dropped mid-epoch stops its workers",
          "[sampler_np2]") {
  REQUIRE(dist::world_size() == 2);
  auto source = std::make_shared<CountingSource>(400);
  {
    data::DataLoaderOptions o;
    o.batch_size = 4;
    o.num_workers = 2;
    o.prefetch_factor = 1;
    o.sampler = std::make_shared<dist::DistributedSampler>(400, 2, dist::rank());
    data::DataLoader loader(source, o);
    loader.set_epoch(3);
    loader.reset();
    CHECK(loader.batch(0).size() == 4);
    loader.set_epoch(4);
    loader.reset();  // mid-epoch: the epoch's workers are stopped and joined, new ones start
    CHECK(loader.batch(0).size() == 4);
  }  // destroyed mid-epoch
  CHECK(source.use_count() == 1);  // no worker holds the loader's reference
  const std::int64_t after = source->total_gets();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(source->total_gets() == after);  // nothing decodes any more
  // per epoch the batch taken and at most the 2 the workers may build ahead (2 workers x 1)
  CHECK(after >= 2 * 4);
  CHECK(after <= 2 * 3 * 4);
  dist::barrier();
}

namespace {

constexpr std::int64_t kRows = 60, kIn = 5, kClasses = 3;

// kRows rows of kIn features, classes from a fixed rule; the same on every rank.
data::Dataset table() {
  Generator gen(41);
  Tensor x = randn({kRows, kIn}, Dtype::Float32, gen);
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < kRows; ++i) y.push_back((i * 7) % kClasses);
  return data::Dataset::make(x, Tensor::from_int64(y, {kRows}));
}

std::vector<double> parameters_of(const layers::Module& m) {
  std::vector<double> out;
  for (const auto& p : m.parameters())
    for (double v : p.to_vector()) out.push_back(v);
  return out;
}

// Two epochs of SGD: data parallel over rank shares of batch 8 (`workers` prefetching), or,
// with `world` 1, one process over the same global batches of 16 (rank 0's batch i, then rank
// 1's), from the two ranks' samplers interleaved.
class GlobalOrder : public data::Sampler {
 public:
  GlobalOrder() : r0_(kRows, 2, 0, {.seed = 6}), r1_(kRows, 2, 1, {.seed = 6}) {}
  std::int64_t size() const override { return kRows; }
  void set_epoch(std::int64_t e) override {
    r0_.set_epoch(e);
    r1_.set_epoch(e);
  }
  std::vector<std::int64_t> epoch_indices() override {
    const std::vector<std::int64_t> a = r0_.indices(), b = r1_.indices();
    std::vector<std::int64_t> out;
    for (std::size_t k = 0; k < a.size(); k += 8) {
      const std::size_t e = std::min(a.size(), k + 8);
      out.insert(out.end(), a.begin() + static_cast<std::ptrdiff_t>(k), a.begin() + static_cast<std::ptrdiff_t>(e));
      out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(k), b.begin() + static_cast<std::ptrdiff_t>(e));
    }
    return out;
  }

 private:
  dist::DistributedSampler r0_, r1_;
};

std::vector<double> train_two_epochs(bool parallel, std::int64_t workers, std::vector<double>* losses) {
  Generator init(8), gen(2);
  auto model = std::make_shared<layers::Linear>(kIn, kClasses, true, Dtype::Float32, init);
  train::FitOptions fo;
  fo.epochs = 2;
  fo.generator = &gen;
  data::DataLoaderOptions o;
  o.num_workers = workers;
  if (parallel) {
    fo.parallel = train::make_mpi_data_parallel(false);
    fo.parallel->prepare(model);
    o.batch_size = 8;
    o.sampler = std::make_shared<dist::DistributedSampler>(kRows, 2, dist::rank(), dist::DistributedSamplerOptions{.seed = 6});
  } else {
    o.batch_size = 16;
    o.sampler = std::make_shared<GlobalOrder>();
  }
  optim::SGD opt(model->parameters(), {.lr = 0.5});
  data::DataLoader loader(table(), o, gen);
  const train::FitResult r = train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, fo);
  for (const auto& e : r.history) losses->push_back(e.get("loss"));
  return parameters_of(*model);
}

}  // namespace

TEST_CASE("fit on 2 ranks over DistributedSampler loaders: the same bits for 0 and 2 workers, the global batches' run",
          "[sampler_np2]") {
  REQUIRE(dist::world_size() == 2);
  std::vector<double> loss0, loss2, loss1;
  const std::vector<double> w0 = train_two_epochs(true, 0, &loss0);
  const std::vector<double> w2 = train_two_epochs(true, 2, &loss2);
  CHECK(w2 == w0);  // bit for bit: prefetching changes nothing
  CHECK(loss2 == loss0);
  // the same weights on both ranks
  std::vector<double> both(w0.size() * 2);
  dist::allgather(w0.data(), static_cast<std::int64_t>(w0.size()), both.data());
  CHECK(std::equal(w0.begin(), w0.end(), both.begin()));
  CHECK(std::equal(w0.begin(), w0.end(), both.begin() + static_cast<std::ptrdiff_t>(w0.size())));
  // one process over the same global batches of 16: the same run up to float rounding
  const std::vector<double> w1 = train_two_epochs(false, 0, &loss1);
  REQUIRE(w1.size() == w0.size());
  double worst = 0;
  for (std::size_t k = 0; k < w0.size(); ++k) worst = std::max(worst, std::abs(w1[k] - w0[k]));
  INFO("largest parameter difference " << worst);
  CHECK(worst < 1e-6);  // 4.5e-8 measured
  REQUIRE(loss1.size() == 2);
  CHECK(loss1[0] == Approx(loss0[0]).epsilon(1e-6));
  CHECK(loss1[1] == Approx(loss0[1]).epsilon(1e-6));
  CHECK(loss1[1] < loss1[0]);  // it trained
}
