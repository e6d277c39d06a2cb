// Collectives whose sizes differ across ranks (run by ctest through `mpirun -np 2`, "[np2]"):
// SyncBatchNorm layers of other num_features, allreduce_sum / allgather of other counts, a
// rank in barrier() while another reduces, a count beyond MPI's int, broadcast_state from
// other roots. Every rank throws the same error naming both before any data moves, nothing
// changes, and the ranks stay in step (before: MPI_ERR_TRUNCATE on one rank, a silently
// mis-sized result, no copy at all, or a hang on the other).
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/module_sync.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include <tapegrad/layers/linear.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {

// A matched collective after the error: the ranks are still in step.
void check_in_step() {
  double v = 1;
  dist::allreduce_sum(&v, 1);
  CHECK(v == 2);
}

}  // namespace

TEST_CASE("SyncBatchNorm of 3 features on rank 0 and 4 on rank 1 fails on every rank naming both and changes nothing",
          "[np2][errors]") {
  REQUIRE(dist::world_size() == 2);
  const std::int64_t C = dist::rank() == 0 ? 3 : 4;
  dist::SyncBatchNorm bn(C);
  bn.train();
  Generator gen(5);
  const Tensor x = randn({8, C}, Dtype::Float32, gen);
  CHECK_THROWS_AS(bn(x), std::runtime_error);
  CHECK_THROWS_WITH(bn(x), Catch::Contains("rank 0 calls SyncBatchNorm statistics with num_features 3") &&
                               Catch::Contains("rank 1 calls SyncBatchNorm statistics with num_features 4"));
  CHECK(bn.running_mean.to_vector() == std::vector<double>(static_cast<std::size_t>(C), 0.0));
  CHECK(bn.running_var.to_vector() == std::vector<double>(static_cast<std::size_t>(C), 1.0));
  CHECK(bn.batches_tracked() == 0);
  check_in_step();
}

TEST_CASE("allreduce_sum of 3 values on rank 0 and 4 on rank 1 fails on every rank and changes nothing",
          "[np2][errors]") {
  REQUIRE(dist::world_size() == 2);
  std::vector<double> v(dist::rank() == 0 ? 3 : 4, 1.0);
  CHECK_THROWS_WITH(dist::allreduce_sum(v.data(), static_cast<std::int64_t>(v.size())),
                    Catch::Contains("rank 0 calls allreduce_sum of 3 float64 values") &&
                        Catch::Contains("rank 1 calls allreduce_sum of 4 float64 values"));
  CHECK(v == std::vector<double>(v.size(), 1.0));
  std::vector<std::int64_t> w(dist::rank() == 0 ? 2 : 5, 7);
  CHECK_THROWS_WITH(dist::allreduce_sum(w.data(), static_cast<std::int64_t>(w.size())),
                    Catch::Contains("rank 0 calls allreduce_sum of 2 int64 values") &&
                        Catch::Contains("rank 1 calls allreduce_sum of 5 int64 values"));
  CHECK(w == std::vector<std::int64_t>(w.size(), 7));
  check_in_step();
}

TEST_CASE("allgather of 2 values per rank on rank 0 and 3 on rank 1 fails on every rank", "[np2][errors]") {
  REQUIRE(dist::world_size() == 2);
  const std::int64_t n = dist::rank() == 0 ? 2 : 3;
  std::vector<double> in(static_cast<std::size_t>(n), 1.0), out(static_cast<std::size_t>(2 * n), -1.0);
  CHECK_THROWS_WITH(dist::allgather(in.data(), n, out.data()),
                    Catch::Contains("rank 0 calls allgather of 2 float64 values per rank") &&
                        Catch::Contains("rank 1 calls allgather of 3 float64 values per rank"));
  CHECK(out == std::vector<double>(out.size(), -1.0));
  check_in_step();
}

TEST_CASE("a rank in barrier() while the other is in allreduce_sum fails on every rank", "[np2][errors]") {
  REQUIRE(dist::world_size() == 2);
  double v = 1;
  if (dist::rank() == 0)
    CHECK_THROWS_WITH(dist::barrier(), Catch::Contains("rank 0 calls barrier()") &&
                                           Catch::Contains("rank 1 calls allreduce_sum of 1 float64 values"));
  else
    CHECK_THROWS_WITH(dist::allreduce_sum(&v, 1), Catch::Contains("rank 0 calls barrier()"));
  CHECK(v == 1);
  check_in_step();
}

TEST_CASE("allreduce_sum of more values than MPI's int counts fails on every rank before reading them",
          "[np2][errors]") {
  REQUIRE(dist::world_size() == 2);
  double v = 1;  // n is 2^32 + 1 (an int cast would reduce 1 value); nothing is read
  CHECK_THROWS_AS(dist::allreduce_sum(&v, (std::int64_t(1) << 32) + 1), std::invalid_argument);
  CHECK_THROWS_WITH(dist::allreduce_sum(&v, (std::int64_t(1) << 32) + 1),
                    Catch::Contains("allreduce_sum of 4294967297 float64 values") &&
                        Catch::Contains("expected a count in [0, 2147483647]"));
  CHECK(v == 1);
  check_in_step();
}

TEST_CASE("broadcast_state from root 0 on rank 0 and root 1 on rank 1 fails on every rank and copies nothing",
          "[np2][errors]") {
  REQUIRE(dist::world_size() == 2);
  Generator gen(static_cast<std::uint64_t>(40 + dist::rank()));  // other weights on each rank
  layers::Linear net(3, 2, true, Dtype::Float64, gen);
  const std::vector<double> before = net.parameters()[0].to_vector();
  CHECK_THROWS_WITH(dist::broadcast_state(net, dist::rank()),
                    Catch::Contains("rank 1 differs from rank 0") && Catch::Contains("rank 0 has 'broadcast root 0'") &&
                        Catch::Contains("rank 1 has 'broadcast root 1'"));
  CHECK(net.parameters()[0].to_vector() == before);
  check_in_step();
}
