// ZeroRedundancyOptimizer (ZeRO-1: gradients reduce-scattered, Adam on each rank's half,
// parameters allgathered) against the plain path written out here: rank 0's buffers before
// each forward, one blocking allreduce per gradient, a division by the world size, Adam over
// every parameter. Adam is element-wise and a sum of two values has one rounding, so after
// several steps the parameters must be equal bit for bit ("[np2]", `mpirun -np 2`).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ddp_test_nets.h"
#include <tapegrad/core/autograd.h>
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
using namespace ddp_test;

namespace {

constexpr int kSteps = 6;


layers::StateDict train_plain(Dtype dtype) {
  auto m = bn_mlp(dtype);
  optim::Adam opt(m->parameters(), {.lr = 0.01});
  for (int s = 0; s < kSteps; ++s) {
    copy_rank0_buffers(*m);
    auto [x, y] = mlp_batch(s, dtype);
    opt.zero_grad();
    layers::cross_entropy((*m)(x), y).backward();
    for (auto& p : m->parameters()) {
      const std::vector<double> g = p.grad().to_vector();
      const std::size_t n = g.size();
      std::vector<double> all(2 * n), avg(n);
      dist::allgather(g.data(), static_cast<std::int64_t>(n), all.data());
      for (std::size_t i = 0; i < n; ++i)
        avg[i] = dtype == Dtype::Float32 ? (static_cast<float>(all[i]) + static_cast<float>(all[n + i])) * 0.5f
                                         : (all[i] + all[n + i]) * 0.5;
      p.set_grad(Tensor::from_vector(avg, p.shape(), Dtype::Float64).to(p.dtype()));
    }
    opt.step();
  }
  copy_rank0_buffers(*m);  // what the next forward would do; DDP does it in finish()
  return m->state_dict();
}

struct ZeroRun {
  layers::StateDict state;
  std::int64_t shard_numel = 0;
};

ZeroRun train_zero(Dtype dtype, std::size_t bucket_bytes, std::size_t inplace_bytes) {
  auto m = bn_mlp(dtype);
  dist::DistributedDataParallel ddp(m, {.bucket_cap_bytes = bucket_bytes, .inplace_min_bytes = inplace_bytes});
  dist::ZeroRedundancyOptimizer opt(
      ddp, [](std::vector<Tensor> shard) { return std::make_unique<optim::Adam>(shard, optim::AdamOptions{.lr = 0.01}); });
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = mlp_batch(s, dtype);
    opt.zero_grad();
    layers::cross_entropy(ddp(x), y).backward();
    ddp.finish();
    opt.step();
  }
  return {m->state_dict(), opt.shard_numel()};
}

}  // namespace

TEST_CASE("ZeroRedundancyOptimizer(Adam) equals Adam on allreduced gradients bit for bit (6 steps)",
          "[np2][ddp][zero]") {
  REQUIRE(dist::world_size() == 2);
  for (Dtype dtype : {Dtype::Float64, Dtype::Float32}) {
    INFO("dtype " << dtype_name(dtype));
    const layers::StateDict plain = train_plain(dtype);
    std::int64_t total = 0;
    for (auto& p : bn_mlp(dtype)->parameters()) total += p.numel();
    for (std::size_t inplace : {std::numeric_limits<std::size_t>::max(), std::size_t(512)})
      for (std::size_t bucket : {std::size_t(64), std::size_t(25) << 20}) {
        INFO("bucket_cap_bytes " << bucket << ", inplace_min_bytes " << inplace);
        const ZeroRun z = train_zero(dtype, bucket, inplace);
        REQUIRE(z.state.size() == plain.size());
        for (const auto& [k, v] : plain) {
          INFO(k);
          CHECK(z.state.at(k).to_vector() == v.to_vector());
        }
        // the ranks' shards cover every element once, about half each
        std::vector<double> n{static_cast<double>(z.shard_numel)}, sum = n;
        dist::allreduce_sum(sum.data(), 1);
        CHECK(sum[0] == static_cast<double>(total));
        CHECK(std::abs(n[0] - static_cast<double>(total) / 2) <= 16.0);
      }
  }
}

TEST_CASE("ZeroRedundancyOptimizer: local .grad, no state_dict, a step without a backward does nothing",
          "[np2][ddp][zero]") {
  REQUIRE(dist::world_size() == 2);
  auto m = bn_mlp(Dtype::Float64);
  dist::DistributedDataParallel ddp(m);
  dist::ZeroRedundancyOptimizer opt(
      ddp, [](std::vector<Tensor> shard) { return std::make_unique<optim::Adam>(shard, optim::AdamOptions{.lr = 0.01}); });
  CHECK(opt.type_name() == "ZeroRedundancyOptimizer(Adam)");
  CHECK(opt.parameters().size() == m->parameters().size());
  // a second sharding of the same DDP is refused
  CHECK_THROWS_WITH(dist::ZeroRedundancyOptimizer(ddp, [](std::vector<Tensor> s) {
                      return std::make_unique<optim::Adam>(s, optim::AdamOptions{});
                    }),
                    Catch::Contains("already shards"));
  auto [x, y] = mlp_batch(0, Dtype::Float64);
  layers::cross_entropy(ddp(x), y).backward();
  const std::vector<double> local = m->parameters()[0].grad().to_vector();
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("finish()"));  // DDP's step hook
  ddp.finish();
  CHECK(m->parameters()[0].grad().to_vector() == local);  // only the shard's average exists
  const std::vector<double> w0 = m->parameters()[0].to_vector();
  opt.step();
  const std::vector<double> w1 = m->parameters()[0].to_vector();
  CHECK(w1 != w0);
  opt.step();  // no backward since: nothing to apply
  CHECK(m->parameters()[0].to_vector() == w1);
  CHECK_THROWS_WITH(opt.state_dict(), Catch::Contains("not supported"));
  opt.set_lr(0, 0.5);
  CHECK(opt.lr(0) == 0.5);
  CHECK(opt.wrapped().lr(0) == 0.5);
}

TEST_CASE("ZeroRedundancyOptimizer on rank 0 only fails on every rank in the first step before any reduction",
          "[np2][ddp][zero][errors]") {
  REQUIRE(dist::world_size() == 2);
  auto m = bn_mlp(Dtype::Float64);
  dist::DistributedDataParallel ddp(m);
  std::unique_ptr<optim::Optimizer> opt;
  if (dist::rank() == 0)  // rank 0 reduce-scatters, rank 1 would allreduce the same buckets
    opt = std::make_unique<dist::ZeroRedundancyOptimizer>(
        ddp, [](std::vector<Tensor> s) { return std::make_unique<optim::Adam>(s, optim::AdamOptions{.lr = 0.01}); });
  else
    opt = std::make_unique<optim::Adam>(m->parameters(), optim::AdamOptions{.lr = 0.01});
  auto [x, y] = mlp_batch(0, Dtype::Float64);
  opt->zero_grad();
  CHECK_THROWS_WITH(layers::cross_entropy(ddp(x), y).backward(),
                    Catch::Contains("rank 1 differs from rank 0") &&
                        Catch::Contains("rank 0 has 'gradients reduce-scattered (ZeroRedundancyOptimizer)'") &&
                        Catch::Contains("rank 1 has 'gradients allreduced'"));
}
