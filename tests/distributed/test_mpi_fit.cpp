// train::fit under `mpirun -np 2` ("[np2]"): ranks with other training or validation sets
// fail on every rank before the first step (before: a hang), a partial last batch that
// divides by the ranks is split evenly and trains as one process does (before: out_of_range
// on the last rank after a full epoch, and a hang), one that does not is refused up front;
// evaluate() with other validation sets fails on every rank (before: MPI_ERR_TRUNCATE on one
// rank, a mis-sized sum on the other).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/train/data_parallel.h>
#include <tapegrad/train/evaluate.h>
#include <tapegrad/train/fit.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {

constexpr std::int64_t kIn = 4, kClasses = 3;

// n rows of 4 features and 3 classes, the same on every rank for the same seed.
data::Dataset rows(std::int64_t n, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) y.push_back(gen.randint(kClasses));
  return data::Dataset::make(randn({n, kIn}, Dtype::Float32, gen), Tensor::from_int64(y, {n}));
}

std::shared_ptr<layers::Linear> linear() {
  Generator init(9);
  return std::make_shared<layers::Linear>(kIn, kClasses, true, Dtype::Float32, init);
}

std::vector<double> values_of(const layers::Module& m) {
  std::vector<double> out;
  for (const auto& p : m.parameters())
    for (double v : p.to_vector()) out.push_back(v);
  return out;
}

// One epoch of SGD over `ds` at global batch 32 (data parallel when `parallel`).
std::vector<double> train_one_epoch(const data::Dataset& ds, bool parallel, const data::Dataset* val = nullptr) {
  auto model = linear();
  train::FitOptions o;
  o.validation = val;
  if (parallel) {
    o.parallel = train::make_mpi_data_parallel(false);
    o.parallel->prepare(model);
  }
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  Generator gen(3);
  data::DataLoader loader(ds, {32, true, false}, gen);
  train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o);
  return values_of(*model);
}

}  // namespace

TEST_CASE("fit with 80 training rows on rank 0 and 96 on rank 1 fails on every rank before any step",
          "[np2][fit][errors]") {
  REQUIRE(dist::world_size() == 2);
  const data::Dataset ds = rows(dist::rank() == 0 ? 80 : 96, 1);
  auto model = linear();
  const std::vector<double> before = values_of(*model);
  train::FitOptions o;
  o.parallel = train::make_mpi_data_parallel(false);
  o.parallel->prepare(model);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  Generator gen(3);
  data::DataLoader loader(ds, {32, true, false}, gen);
  CHECK_THROWS_AS(train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o), std::invalid_argument);
  CHECK_THROWS_WITH(train::fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o),
                    Catch::Contains("rank 0 has training rows 80, rank 1 has 96"));
  CHECK(values_of(*model) == before);
}

TEST_CASE("fit with other validation sets on the ranks fails on every rank before any step", "[np2][fit][errors]") {
  REQUIRE(dist::world_size() == 2);
  const data::Dataset ds = rows(64, 1), val = rows(dist::rank() == 0 ? 20 : 24, 2);
  CHECK_THROWS_WITH(train_one_epoch(ds, true, &val), Catch::Contains("rank 0 has validation rows 20, rank 1 has 24"));
  const data::Dataset same = rows(20, 2);
  CHECK_THROWS_WITH(train_one_epoch(ds, true, dist::rank() == 0 ? &same : nullptr),
                    Catch::Contains("rank 0 has validation rows 20, rank 1 has none (no validation set)"));
}

TEST_CASE("evaluate with other validation sets on the ranks fails on every rank", "[np2][fit][errors]") {
  REQUIRE(dist::world_size() == 2);
  auto model = linear();
  const data::Dataset val = rows(dist::rank() == 0 ? 10 : 14, 2);
  train::EvalOptions eo;
  eo.batch_size = 4;
  auto par = train::make_mpi_data_parallel(false);
  eo.parallel = par.get();
  CHECK_THROWS_AS(train::evaluate(*model, val, eo), std::invalid_argument);
  CHECK_THROWS_WITH(train::evaluate(*model, val, eo),
                    Catch::Contains("evaluate: the ranks' data differ: rank 0 has rows 10, rank 1 has 14"));
}

TEST_CASE("fit splits a partial last batch of 16 rows evenly and trains as one process does", "[np2][fit]") {
  REQUIRE(dist::world_size() == 2);
  const data::Dataset ds = rows(80, 1);  // batches of 32, 32 and 16 rows
  const std::vector<double> single = train_one_epoch(ds, false), parallel = train_one_epoch(ds, true);
  REQUIRE(single.size() == parallel.size());
  for (std::size_t i = 0; i < single.size(); ++i) CHECK(parallel[i] == Approx(single[i]).margin(1e-6));
  CHECK(single != values_of(*linear()));  // it trained
}

TEST_CASE("fit refuses a partial last batch of 17 rows on 2 ranks on every rank before any step",
          "[np2][fit][errors]") {
  REQUIRE(dist::world_size() == 2);
  CHECK_THROWS_AS(train_one_epoch(rows(81, 1), true), std::invalid_argument);
  CHECK_THROWS_WITH(train_one_epoch(rows(81, 1), true),
                    Catch::Contains("the last batch has 17 rows (81 training rows, batch_size 32)") &&
                        Catch::Contains("not divisible by the 2 ranks") && Catch::Contains("drop_last = true"));
}
