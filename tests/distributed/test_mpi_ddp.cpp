// DistributedDataParallel + SyncBatchNorm on 2 ranks against one process on the whole
// batch, the layout check, no_sync and unused parameters ("[np2]", run by ctest through
// `mpirun -np 2`), and a 3-rank run with unequal shards ("[np3]").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/module_sync.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/sgd.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

namespace {

constexpr std::int64_t kIn = 12, kClasses = 4, kGlobalBatch = 32, kSteps = 20;

std::shared_ptr<models::MLP> chapter_mlp() {
  models::MLPOptions o;
  o.norm = models::Norm::Batch;
  o.dtype = Dtype::Float64;
  Generator gen(7);
  return std::make_shared<models::MLP>(std::vector<std::int64_t>{kIn, 16, 16, kClasses}, o, gen);
}

struct Batch {
  Tensor x, y;
};
// The same global batches on every rank (seeded).
std::vector<Batch> make_batches() {
  Generator gen(11);
  std::vector<Batch> out;
  for (int s = 0; s < kSteps; ++s) {
    Batch b;
    b.x = randn({kGlobalBatch, kIn}, Dtype::Float64, gen);
    std::vector<std::int64_t> y;
    for (int i = 0; i < kGlobalBatch; ++i) y.push_back(gen.randint(kClasses));
    b.y = Tensor::from_int64(y, {kGlobalBatch});
    out.push_back(b);
  }
  return out;
}

Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t n) { return narrow(t, 0, begin, n).clone(); }

struct Run {
  std::vector<double> losses;
  layers::StateDict state;
};

Run train_single(const std::vector<Batch>& data) {
  auto net = chapter_mlp();
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  Run r;
  for (auto& b : data) {
    opt.zero_grad();
    Tensor loss = layers::cross_entropy((*net)(b.x), b.y);
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item());
  }
  r.state = net->state_dict();
  return r;
}

// Each rank trains on its rows of every global batch; losses are the global mean.
Run train_distributed(const std::vector<Batch>& data, bool sync_bn, std::size_t bucket_bytes) {
  layers::ModulePtr net = chapter_mlp();
  if (sync_bn) net = dist::convert_sync_batchnorm(net);
  dist::DistributedDataParallel ddp(net, {.bucket_cap_bytes = bucket_bytes});
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  const std::int64_t R = dist::world_size(), per = kGlobalBatch / R, r = dist::rank();
  Run out;
  for (auto& b : data) {
    opt.zero_grad();
    Tensor loss = layers::cross_entropy(ddp(rows(b.x, r * per, per)), rows(b.y, r * per, per));
    loss.backward();
    ddp.finish();
    opt.step();
    double l = loss.item() / static_cast<double>(R);
    dist::allreduce_sum(&l, 1);
    out.losses.push_back(l);
  }
  out.state = net->state_dict();
  return out;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector(), vb = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]) / std::max(1.0, std::abs(vb[i])));
  return m;
}

struct Diff {
  double loss = 0, state = 0;
};
Diff compare(const Run& got, const Run& want) {
  Diff d;
  for (std::size_t i = 0; i < want.losses.size(); ++i)
    d.loss = std::max(d.loss, std::abs(got.losses[i] - want.losses[i]) / std::max(1.0, std::abs(want.losses[i])));
  for (auto& [k, v] : want.state) d.state = std::max(d.state, max_rel_diff(got.state.at(k), v));
  return d;
}

}  // namespace

TEST_CASE("DDP + SyncBatchNorm on 2 ranks x 16 equals one process at batch 32 (20 SGD steps, float64)",
          "[np2][ddp]") {
  REQUIRE(dist::world_size() == 2);
  const auto data = make_batches();
  const Run single = train_single(data);
  for (std::size_t bucket : {std::size_t(25) << 20, std::size_t(512)}) {  // one bucket, several buckets
    const Diff d = compare(train_distributed(data, true, bucket), single);
    INFO("bucket_cap_bytes " << bucket << ": max relative difference, losses " << d.loss << ", state " << d.state);
    CHECK(d.loss <= 1e-10);
    CHECK(d.state <= 1e-10);
  }
  // plain BatchNorm normalises each rank's 16 rows on their own: the training differs
  const Diff plain = compare(train_distributed(data, false, std::size_t(25) << 20), single);
  if (dist::rank() == 0)
    std::printf("plain BatchNorm on 2 ranks vs one process: max relative difference of the losses %.3g, of the "
                "parameters and buffers %.3g (SyncBatchNorm: <= 1e-10)\n",
                plain.loss, plain.state);
  CHECK(plain.loss > 1e-4);
  CHECK(plain.state > 1e-4);
}

TEST_CASE("DDP reduces in buckets of reverse parameter order, started during backward", "[np2][ddp]") {
  auto net = chapter_mlp();  // 0.weight [16,12], 0.bias, 1.weight, 1.bias, 3.weight [16,16] ...
  dist::DistributedDataParallel ddp(net, {.bucket_cap_bytes = 512});
  const auto layout = ddp.bucket_layout();
  const std::size_t P = net->parameters().size();
  REQUIRE(!layout.empty());
  CHECK(layout.front().front() == P - 1);
  CHECK(layout.back().back() == 0);
  std::size_t total = 0;
  for (auto& b : layout) total += b.size();
  CHECK(total == P);
  CHECK(layout.size() > 2);
  // every parameter is used: each bucket starts during the backward, none waits for finish()
  Generator gen(4);
  sum(ddp(randn({8, kIn}, Dtype::Float64, gen))).backward();
  CHECK(ddp.buckets_launched_in_backward() == layout.size());
  CHECK(ddp.buckets_launched_in_finish() == 0);
  ddp.finish();
  CHECK(ddp.buckets_launched_in_finish() == 0);
}

TEST_CASE("DDP: different models on the ranks fail with a message on every rank", "[np2][ddp]") {
  models::MLPOptions o;
  o.dtype = Dtype::Float64;
  Generator gen(1);
  const std::int64_t hidden = dist::rank() == 0 ? 8 : 9;
  auto net = std::make_shared<models::MLP>(std::vector<std::int64_t>{4, hidden, 2}, o, gen);
  CHECK_THROWS_WITH(dist::DistributedDataParallel(net),
                    Catch::Contains("rank 1 differs from rank 0") && Catch::Contains("0.weight [8, 4] float64") &&
                        Catch::Contains("0.weight [9, 4] float64"));
}

TEST_CASE("DDP: the constructor copies rank 0's parameters and buffers to every rank", "[np2][ddp]") {
  models::MLPOptions o;
  o.norm = models::Norm::Batch;
  o.dtype = Dtype::Float64;
  Generator gen(100 + dist::rank());  // different weights per rank
  auto net = std::make_shared<models::MLP>(std::vector<std::int64_t>{4, 6, 2}, o, gen);
  net->named_buffers()[0].second.fill_(static_cast<double>(dist::rank() + 1));
  dist::DistributedDataParallel ddp(net);
  for (auto& [k, t] : net->state_dict()) {
    std::vector<double> v = t.to_vector(), sum = v;
    dist::allreduce_sum(sum.data(), static_cast<std::int64_t>(sum.size()));
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(sum[i] == 2 * v[i]);  // equal on both ranks
  }
  CHECK(net->named_buffers()[0].second.to_vector()[0] == 1.0);  // rank 0's value
}

TEST_CASE("DDP: no_sync accumulates locally, the next backward averages the sum", "[np2][ddp]") {
  auto lin = std::make_shared<layers::Linear>(3, 1, true, Dtype::Float64);
  dist::DistributedDataParallel ddp(lin);
  const double r = dist::rank();
  Tensor x1 = Tensor::from_vector({1 + r, 2, 3}, {1, 3}, Dtype::Float64);
  Tensor x2 = Tensor::from_vector({10 * (1 + r), 0, 0}, {1, 3}, Dtype::Float64);
  {
    auto guard = ddp.no_sync();
    sum(ddp(x1)).backward();
    ddp.finish();  // no-op inside no_sync
    CHECK(lin->weight.grad().to_vector() == std::vector<double>{1 + r, 2, 3});  // local only
  }
  sum(ddp(x2)).backward();
  ddp.finish();
  // (x1 + x2) averaged over ranks r = 0, 1: ((1 + 10 + 2 + 20) / 2, 2, 3)
  CHECK(lin->weight.grad().to_vector() == std::vector<double>{16.5, 2, 3});
  CHECK(lin->bias.grad().to_vector() == std::vector<double>{2});
}

TEST_CASE("DDP: a parameter unused on one rank gets the average with zero there", "[np2][ddp]") {
  auto a = std::make_shared<layers::Linear>(2, 1, false, Dtype::Float64);
  auto b = std::make_shared<layers::Linear>(2, 1, false, Dtype::Float64);
  auto net = std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{a, b});
  dist::DistributedDataParallel ddp(net, {.bucket_cap_bytes = 8});  // one bucket per parameter
  Tensor x = Tensor::from_vector({1, 2}, {1, 2}, Dtype::Float64);
  // rank 0 uses only a; rank 1 uses a and b (b's bucket is ready on rank 1 in backward, on rank 0 in finish)
  Tensor y = (*a)(x);
  if (dist::rank() == 1) y = y + (*b)(Tensor::from_vector({4, 6}, {1, 2}, Dtype::Float64));
  sum(y).backward();
  ddp.finish();
  CHECK(a->weight.grad().to_vector() == std::vector<double>{1, 2});
  CHECK(b->weight.grad().to_vector() == std::vector<double>{2, 3});  // (0 + (4, 6)) / 2
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  // a step before finish() is refused
  sum((*a)(x)).backward();
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("finish()"));
  ddp.finish();
  CHECK_NOTHROW(opt.step());
}

TEST_CASE("SyncBatchNorm on 3 ranks with shards of 5, 1 and 0 rows equals BatchNorm on the 6 rows", "[np3]") {
  REQUIRE(dist::world_size() == 3);
  Generator gen(3);
  Tensor all = randn({6, 4, 3}, Dtype::Float64, gen);
  Tensor gy = randn({6, 4, 3}, Dtype::Float64, gen);
  const std::int64_t begin[] = {0, 5, 6}, count[] = {5, 1, 0};
  const int r = dist::rank();
  layers::BatchNorm1d bn(4, {.momentum = std::nullopt, .dtype = Dtype::Float64});
  dist::SyncBatchNorm sbn(4, {.momentum = std::nullopt, .dtype = Dtype::Float64});
  Tensor xa = all.clone().requires_grad_();
  Tensor ya = bn(xa);
  ya.backward(gy);
  Tensor xs = rows(all, begin[r], count[r]).requires_grad_();
  Tensor ys = sbn(xs);
  ys.backward(rows(gy, begin[r], count[r]));
  CHECK(max_rel_diff(ys, rows(ya, begin[r], count[r])) <= 1e-12);
  if (count[r] > 0) CHECK(max_rel_diff(xs.grad(), rows(xa.grad(), begin[r], count[r])) <= 1e-12);
  CHECK(max_rel_diff(sbn.running_mean, bn.running_mean) <= 1e-12);
  CHECK(max_rel_diff(sbn.running_var, bn.running_var) <= 1e-12);
  CHECK(sbn.batches_tracked() == 1);
}

TEST_CASE("SyncBatchNorm with one value per channel over all ranks throws on every rank", "[np2]") {
  dist::SyncBatchNorm sbn(3);
  // rank 0 holds one row, rank 1 none: m = 1 globally, so both refuse (no rank is left waiting)
  Tensor x = Tensor::ones({dist::rank() == 0 ? 1 : 0, 3});
  CHECK_THROWS_WITH(sbn(x), Catch::Contains("more than 1 value per channel over all 2 ranks"));
  CHECK(sbn.batches_tracked() == 0);
  // one row on each rank is enough (m = 2)
  Tensor y = sbn(Tensor::full({1, 3}, dist::rank() == 0 ? 1.0 : 3.0));
  CHECK(y.to_vector()[0] == Approx(dist::rank() == 0 ? -1.0 : 1.0).epsilon(1e-5));
  CHECK(sbn.running_mean.to_vector()[0] == Approx(0.2));  // 0.9·0 + 0.1·2
  CHECK(sbn.running_var.to_vector()[0] == Approx(1.1));   // 0.9·1 + 0.1·2 (unbiased: ((1-2)² + (3-2)²)/1)
}
