// A gradient penalty under DistributedDataParallel on 2 ranks ("[np2]", mpirun -np 2): the
// inner gradient taken with autograd::grad(create_graph) runs no reduction, the one backward
// of the total loss is averaged, and the result equals one process on the whole batch.
// backward(create_graph=true) under DDP is refused on every rank.
#include <catch2/catch.hpp>

#include <cmath>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/models/mlp.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {
constexpr std::int64_t kIn = 6, kBatch = 8;

std::shared_ptr<models::MLP> net() {
  Generator gen(5);
  models::MLPOptions o;
  o.dtype = Dtype::Float64;
  return std::make_shared<models::MLP>(std::vector<std::int64_t>{kIn, 8, 3}, o, gen);
}

// mean squared error + 0.1 · mean over rows of ||d out / d x_row||² (out = Σ of the net's outputs)
template <class Net>
Tensor total_loss(Net& m, const Tensor& x0, const Tensor& target) {
  Tensor x = x0.clone();
  x.requires_grad_();
  Tensor y = m(x);
  Tensor gx = autograd::grad({sum(y)}, {x}, {}, {.create_graph = true})[0];
  Tensor penalty = mean(sum(square(gx), {1}));
  return add(mean(square(sub(y, target))), mul(penalty, 0.1));
}
}  // namespace

TEST_CASE("DDP: a gradient penalty through autograd::grad averages as one process on the whole batch",
          "[np2][ddp][second_order]") {
  REQUIRE(dist::world_size() == 2);
  Generator gen(9);
  const Tensor x = randn({kBatch, kIn}, Dtype::Float64, gen), t = randn({kBatch, 3}, Dtype::Float64, gen);
  auto single = net();
  total_loss(*single, x, t).backward();
  auto local = net();
  dist::DistributedDataParallel ddp(local);
  const std::int64_t per = kBatch / 2, r = dist::rank();
  total_loss(ddp, narrow(x, 0, r * per, per).clone(), narrow(t, 0, r * per, per).clone()).backward();
  ddp.finish();
  auto want = single->named_parameters();
  auto got = local->named_parameters();
  REQUIRE(want.size() == got.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    const auto a = got[k].second.grad().to_vector(), b = want[k].second.grad().to_vector();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO(want[k].first << "[" << i << "]: " << a[i] << " vs " << b[i]);
      CHECK(std::abs(a[i] - b[i]) <= 1e-12 * std::max(1.0, std::abs(b[i])));
    }
  }
}

TEST_CASE("DDP: backward(create_graph=true) is refused on every rank", "[np2][ddp][second_order]") {
  REQUIRE(dist::world_size() == 2);
  Generator gen(4);
  auto local = net();
  dist::DistributedDataParallel ddp(local);
  const Tensor x = randn({4, kIn}, Dtype::Float64, gen);
  Tensor loss = mean(square(ddp(x)));
  REQUIRE_THROWS_WITH(loss.backward({}, false, true), Catch::Contains("backward(create_graph=true) is not supported"));
}
