// ZeroRedundancyOptimizer in a world of one (no mpirun, "[single]"): the shard is every
// element, and training equals plain Adam bit for bit.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/zero_redundancy_optimizer.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

TEST_CASE("ZeroRedundancyOptimizer in a world of one equals Adam bit for bit", "[single][zero]") {
  REQUIRE(dist::world_size() == 1);
  auto make = [] {
    models::MLPOptions o;
    o.norm = models::Norm::Batch;
    Generator gen(3);
    return std::make_shared<models::MLP>(std::vector<std::int64_t>{5, 8, 3}, o, gen);
  };
  auto plain = make(), sharded = make();
  optim::Adam adam(plain->parameters(), {.lr = 0.05});
  dist::DistributedDataParallel ddp(sharded, {.inplace_min_bytes = 100});  // in place and packed buckets
  dist::ZeroRedundancyOptimizer zero(
      ddp, [](std::vector<Tensor> s) { return std::make_unique<optim::Adam>(s, optim::AdamOptions{.lr = 0.05}); });
  std::int64_t total = 0;
  for (auto& p : sharded->parameters()) total += p.numel();
  CHECK(zero.shard_numel() == total);
  for (int s = 0; s < 4; ++s) {
    Generator gen(100 + static_cast<std::uint64_t>(s));
    Tensor x = randn({6, 5}, Dtype::Float32, gen);
    Tensor y = Tensor::from_int64({0, 1, 2, 0, 1, 2}, {6});
    adam.zero_grad();
    layers::cross_entropy((*plain)(x), y).backward();
    adam.step();
    zero.zero_grad();
    layers::cross_entropy(ddp(x), y).backward();
    ddp.finish();
    zero.step();
  }
  const auto want = plain->state_dict(), got = sharded->state_dict();
  for (const auto& [k, v] : want) {
    INFO(k);
    CHECK(got.at(k).to_vector() == v.to_vector());
  }
}
