// DistributedDataParallel's overlapped path (buckets started from the backward's hooks,
// progressed with MPI_Test, completed in finish(); large gradients reduced in their own
// memory; the step check and the buffer broadcast posted without waiting, the buffers made
// equal in finish()) against the plain path written out here: rank 0's buffers copied before
// each forward, a local backward, then one blocking allreduce per gradient and a division by
// the world size. On 2 ranks a sum of two
// values is the same in any order, so after several Adam steps the parameters and buffers
// must be equal bit for bit ("[np2]", run by ctest through `mpirun -np 2`).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ddp_test_nets.h"
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/adam.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;
using namespace ddp_test;

namespace {

constexpr int kSteps = 6;


// Every buffer's values, in named_buffers order.
std::vector<std::vector<double>> buffer_values(layers::Module& m) {
  std::vector<std::vector<double>> out;
  for (auto& b : m.buffers()) out.push_back(b.to_vector());
  return out;
}

// A training run's end state and, per step, this rank's buffers right after its forward.
struct Run {
  layers::StateDict state;
  std::vector<std::vector<std::vector<double>>> after_forward;
};

// The plain path: rank 0's buffers copied by hand before each forward; every gradient
// gathered from both ranks (as float64, exact for float32 values), summed in the
// parameter's dtype (one rounding, as MPI_SUM over MPI_FLOAT) and multiplied by 1/R.
// After the last step it makes the copy PyTorch's next forward would make: DDP makes it
// in finish() (DDPOptions::broadcast_buffers).
Run train_plain(Dtype dtype) {
  auto m = bn_mlp(dtype);
  optim::Adam opt(m->parameters(), {.lr = 0.01});
  const double R = dist::world_size();
  REQUIRE(R == 2);  // the plain path below sums exactly two ranks
  Run run;
  for (int s = 0; s < kSteps; ++s) {
    copy_rank0_buffers(*m);  // broadcast_buffers: rank 0's running statistics
    auto [x, y] = mlp_batch(s, dtype);
    opt.zero_grad();
    Tensor out = (*m)(x);
    run.after_forward.push_back(buffer_values(*m));
    layers::cross_entropy(out, y).backward();
    for (auto& p : m->parameters()) {
      const std::vector<double> g = p.grad().to_vector();
      const std::size_t n = g.size();
      std::vector<double> all(2 * n);
      dist::allgather(g.data(), static_cast<std::int64_t>(n), all.data());
      std::vector<double> avg(n);
      for (std::size_t i = 0; i < n; ++i) {
        if (dtype == Dtype::Float32)
          avg[i] = (static_cast<float>(all[i]) + static_cast<float>(all[n + i])) * static_cast<float>(1.0 / R);
        else
          avg[i] = (all[i] + all[n + i]) * (1.0 / R);
      }
      p.set_grad(Tensor::from_vector(avg, p.shape(), Dtype::Float64).to(p.dtype()));  // exact: avg is in p's dtype
    }
    opt.step();
  }
  copy_rank0_buffers(*m);
  run.state = m->state_dict();
  return run;
}

Run train_ddp(Dtype dtype, std::size_t bucket_bytes, std::size_t inplace_bytes) {
  auto m = bn_mlp(dtype);
  auto ddp = std::make_unique<dist::DistributedDataParallel>(
      m, dist::DDPOptions{.bucket_cap_bytes = bucket_bytes, .inplace_min_bytes = inplace_bytes});
  optim::Adam opt(m->parameters(), {.lr = 0.01});
  Run run;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = mlp_batch(s, dtype);
    opt.zero_grad();
    Tensor out = (*ddp)(x);
    run.after_forward.push_back(buffer_values(*m));
    layers::cross_entropy(out, y).backward();
    ddp->finish();
    opt.step();
  }
  CHECK(ddp->buckets_launched_in_finish() == 0);  // every bucket started during a backward
  CHECK(ddp->buckets_launched_in_backward() == ddp->bucket_layout().size() * kSteps);
  run.state = m->state_dict();
  return run;
}

void check_bitwise_equal(const layers::StateDict& got, const layers::StateDict& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [k, v] : want) {
    INFO(k);
    CHECK(got.at(k).to_vector() == v.to_vector());
  }
}

}  // namespace

TEST_CASE("DDP overlapped in buckets, packed or in place, equals the plain allreduce path bit for bit (6 Adam steps)",
          "[np2][ddp][overlap]") {
  for (Dtype dtype : {Dtype::Float64, Dtype::Float32}) {
    INFO("dtype " << dtype_name(dtype));
    const Run plain_run = train_plain(dtype);
    const layers::StateDict& plain = plain_run.state;
    // packed buckets only; the larger weights reduced in their gradients' memory; every
    // parameter in place
    for (std::size_t inplace : {std::numeric_limits<std::size_t>::max(), std::size_t(512), std::size_t(0)})
      for (std::size_t bucket : {std::size_t(64), std::size_t(1024), std::size_t(25) << 20}) {
        INFO("bucket_cap_bytes " << bucket << ", inplace_min_bytes " << inplace);
        const Run ddp_run = train_ddp(dtype, bucket, inplace);
        check_bitwise_equal(ddp_run.state, plain);
        // each forward updated the same values as after PyTorch's pre-forward broadcast
        CHECK(ddp_run.after_forward == plain_run.after_forward);
      }
    // the ranks trained on different rows and still hold the same parameters and, after
    // finish(), rank 0's buffers
    for (const auto& [k, v] : plain) {
      std::vector<double> mine = v.to_vector(), sum = mine;
      dist::allreduce_sum(sum.data(), static_cast<std::int64_t>(sum.size()));
      for (std::size_t i = 0; i < mine.size(); ++i) CHECK(sum[i] == 2 * mine[i]);
    }
  }
}

TEST_CASE("DDP: a train forward under no-grad starts from rank 0's buffers (broadcast before it runs)",
          "[np2][ddp][overlap]") {
  ModeChecksPause pause;  // train-mode forwards under no-grad, on purpose
  auto m = bn_mlp(Dtype::Float64);
  dist::DistributedDataParallel ddp(m);
  for (int s = 0; s < 3; ++s) {
    auto [x, y] = mlp_batch(s, Dtype::Float64);
    // make the ranks' running statistics differ; one train forward must start from rank 0's
    const double fill = (dist::rank() == 0 ? 1.0 : 1000.0) * (s + 1);
    for (auto& b : m->buffers())
      if (b.dtype() == Dtype::Float64) b.fill_(fill);
    const NoGradGuard no_grad;  // a forward only: nothing to reduce afterwards
    (void)ddp(x);
    // running = 0.9 * (rank 0's fill) + 0.1 * this rank's batch statistic: far below rank 1's
    // fill; num_batches_tracked (int64) is rank 0's + 1 on both ranks.
    for (auto& [k, b] : m->named_buffers()) {
      INFO(k << " step " << s);
      if (b.dtype() == Dtype::Int64) {
        std::vector<double> v = b.to_vector(), sum = v;
        dist::allreduce_sum(sum.data(), static_cast<std::int64_t>(sum.size()));
        CHECK(sum[0] == 2 * v[0]);
      } else {
        for (double v : b.to_vector()) CHECK(std::abs(v) < 100.0 * (s + 1));
      }
    }
  }
}

TEST_CASE("DDP: a parameter of >= inplace_min_bytes is a bucket of its own", "[np2][ddp][overlap]") {
  auto m = bn_mlp(Dtype::Float32);  // 0.weight [24, 10] = 960 bytes, 3.weight [16, 24] = 1536 bytes, ...
  dist::DistributedDataParallel ddp(m, {.bucket_cap_bytes = std::size_t(25) << 20, .inplace_min_bytes = 1000});
  const auto names = m->named_parameters();
  for (const auto& b : ddp.bucket_layout()) {
    bool big = false;
    for (std::size_t i : b) big = big || names[i].second.nbytes() >= 1000;
    INFO("bucket of " << b.size() << " starting at " << names[b.front()].first);
    CHECK((!big || b.size() == 1));
  }
  CHECK(ddp.bucket_layout().size() == 3);  // [tail of the net], [3.weight], [the rest up to 0.weight]
}
