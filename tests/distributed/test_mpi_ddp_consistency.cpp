// What the ranks communicate must agree (run by ctest through `mpirun -np 2`, "[np2]"):
// a parameter frozen on one rank, one rank in eval() and the other in train(), or other
// DDP options, are the same clear error on every rank (before the fix: a silently wrong
// average on rank 0, MPI_ERR_TRUNCATE on rank 1 and a hang; or unmatched broadcasts and
// diverging running statistics). And DDP's step check concerns its own parameters only.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "ddp_test_nets.h"
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;
using namespace ddp_test;

namespace {

Tensor batch_for_rank(std::uint64_t seed) { return small_rows(seed + static_cast<std::uint64_t>(dist::rank())); }

// One full DDP step; returns the first layer's averaged weight gradient.
std::vector<double> ddp_step(dist::DistributedDataParallel& ddp, layers::Module& net, std::uint64_t seed) {
  for (auto& p : net.parameters()) p.zero_grad();
  sum(ddp(batch_for_rank(seed))).backward();
  ddp.finish();
  return net.parameters()[0].grad().to_vector();
}

bool same_on_every_rank(std::vector<double> v) {
  std::vector<double> sum = v;
  dist::allreduce_sum(sum.data(), static_cast<std::int64_t>(sum.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    if (sum[i] != 2 * v[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("DDP: a parameter frozen on one rank before construction fails on every rank", "[np2][ddp]") {
  REQUIRE(dist::world_size() == 2);
  auto net = small_net();
  if (dist::rank() == 1) net->parameters()[2].requires_grad_(false);  // BatchNorm's weight
  CHECK_THROWS_WITH(dist::DistributedDataParallel(net),
                    Catch::Contains("requires_grad") && Catch::Contains("rank 1 differs from rank 0") &&
                        Catch::Contains("1.weight requires grad") && Catch::Contains("1.weight frozen"));
}

TEST_CASE("DDP: a parameter frozen on one rank after construction fails on every rank, then steps work",
          "[np2][ddp]") {
  ModeChecksPause pause;  // a step refused mid-backward, on purpose
  REQUIRE(dist::world_size() == 2);
  auto net = small_net();
  dist::DistributedDataParallel ddp(net);
  const std::vector<double> first = ddp_step(ddp, *net, 1);
  CHECK(same_on_every_rank(first));
  Tensor w = net->parameters()[0];
  if (dist::rank() == 1) w.requires_grad_(false);
  // a training step's forward does not wait for the check: the step throws at its first
  // gradient hook, before any gradient is sent
  CHECK_THROWS_WITH(
      [&] {
        sum(ddp(batch_for_rank(2))).backward();
        ddp.finish();
      }(),
      Catch::Contains("the ranks disagree") && Catch::Contains("0.weight requires grad") &&
          Catch::Contains("0.weight frozen"));
  // nothing was communicated: once the ranks agree again, the next step averages as before
  w.requires_grad_(true);
  const std::vector<double> again = ddp_step(ddp, *net, 1);
  CHECK(same_on_every_rank(again));
  CHECK(again == first);
}

TEST_CASE("DDP: one rank in eval() and the other in train() fails on every rank", "[np2][ddp]") {
  ModeChecksPause pause;  // a refused step and an eval() forward on fresh statistics, on purpose
  REQUIRE(dist::world_size() == 2);
  auto net = small_net();
  dist::DistributedDataParallel ddp(net);
  if (dist::rank() == 1) net->eval();
  // rank 1's eval() forward waits for the check and throws; rank 0's training step throws at
  // its first gradient hook
  CHECK_THROWS_WITH(
      [&] {
        sum(ddp(batch_for_rank(3))).backward();
        ddp.finish();
      }(),
      Catch::Contains("the ranks disagree") && Catch::Contains("mode train()") && Catch::Contains("mode eval()"));
  // eval() under no-grad on one rank alone communicates nothing, so it checks nothing
  if (dist::rank() == 1) {
    NoGradGuard ng;
    CHECK_NOTHROW(ddp(batch_for_rank(3)));
  }
  // back in step: the next step averages, the same on both ranks
  net->train();
  CHECK(same_on_every_rank(ddp_step(ddp, *net, 4)));
}

TEST_CASE("DDP: different options on the ranks fail on every rank", "[np2][ddp]") {
  REQUIRE(dist::world_size() == 2);
  auto net = small_net();
  const std::size_t cap = dist::rank() == 0 ? 64 : 128;
  CHECK_THROWS_WITH(dist::DistributedDataParallel(net, {.bucket_cap_bytes = cap}),
                    Catch::Contains("bucket_cap_bytes 64") && Catch::Contains("bucket_cap_bytes 128"));
}

TEST_CASE("DDP: another model's optimizer may step between backward and finish()", "[np2][ddp]") {
  REQUIRE(dist::world_size() == 2);
  auto net = small_net();
  dist::DistributedDataParallel ddp(net);
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto other = std::make_shared<layers::Linear>(2, 1, true, Dtype::Float64);  // unrelated, not wrapped
  optim::SGD other_opt(other->parameters(), {.lr = 0.5});
  sum(ddp(batch_for_rank(7))).backward();
  sum((*other)(Tensor::from_vector({1.0, 2.0}, {1, 2}, Dtype::Float64))).backward();
  const double w0 = other->weight.to_vector()[0];
  CHECK_NOTHROW(other_opt.step());  // before the fix: refused ("optimizer.step() before finish()")
  CHECK(other->weight.to_vector()[0] == w0 - 0.5 * 1.0);
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("finish()"));  // DDP's own parameters still wait
  ddp.finish();
  CHECK_NOTHROW(opt.step());
}
