// distributed/ in a world of one (no mpirun) and the sampler: "[single]".
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/autograd.h>
#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/data_parallel.h>
#include <tapegrad/distributed/distributed_sampler.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/sync_batch_norm.h>
#include <tapegrad/layers/fuse_modules.h>
#include <tapegrad/models/mlp.h>

using namespace tapegrad;
namespace dist = tapegrad::distributed;

TEST_CASE("without mpirun the environment is a world of one", "[single]") {
  if (dist::launched_by_mpirun()) return;  // this case is for the plain run
  CHECK(dist::world_size() == 1);
  CHECK(dist::rank() == 0);
  CHECK_FALSE(dist::is_initialized());
  double x[2] = {1.5, 2.5};
  dist::allreduce_sum(x, 2);
  CHECK(x[0] == 1.5);
  CHECK_NOTHROW(dist::barrier());
}

TEST_CASE("SyncBatchNorm in a world of one equals BatchNorm (train and eval, all shapes)", "[single]") {
  for (auto shape : {Shape{5, 3}, Shape{4, 3, 6}, Shape{2, 3, 4, 5}}) {
    Generator gen(5);
    Tensor x = randn(shape, Dtype::Float64, gen), gy = randn(shape, Dtype::Float64, gen);
    layers::BatchNormOptions o{.momentum = 0.3, .dtype = Dtype::Float64};
    std::unique_ptr<layers::BatchNormBase> bnp;
    if (shape.size() == 4)
      bnp = std::make_unique<layers::BatchNorm2d>(3, o);
    else
      bnp = std::make_unique<layers::BatchNorm1d>(3, o);
    layers::BatchNormBase& bn = *bnp;
    dist::SyncBatchNorm sbn(3, o);
    {
      NoGradGuard ng;
      bn.weight.fill_(1.5);
      sbn.weight.fill_(1.5);
    }
    for (bool train : {true, true, false}) {
      bn.train(train);
      sbn.train(train);
      Tensor xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
      Tensor y1 = bn(xa);
      Tensor y2 = sbn(xb);
      y1.backward(gy);
      y2.backward(gy);
      auto close = [](const Tensor& a, const Tensor& b) {
        auto va = a.to_vector(), vb = b.to_vector();
        for (std::size_t i = 0; i < va.size(); ++i)
          if (std::abs(va[i] - vb[i]) > 1e-12 * std::max(1.0, std::abs(vb[i]))) return false;
        return va.size() == vb.size();
      };
      CHECK(close(y2, y1));
      CHECK(close(xb.grad(), xa.grad()));
      CHECK(close(sbn.weight.grad(), bn.weight.grad()));
      CHECK(close(sbn.bias.grad(), bn.bias.grad()));
      CHECK(close(sbn.running_mean, bn.running_mean));
      CHECK(close(sbn.running_var, bn.running_var));
      CHECK(sbn.batches_tracked() == bn.batches_tracked());
      bn.zero_grad();
      sbn.zero_grad();
    }
  }
}

TEST_CASE("SyncBatchNorm refuses one value per channel in training, before touching its buffers", "[single]") {
  if (dist::world_size() != 1) return;
  dist::SyncBatchNorm sbn(2);
  CHECK_THROWS_WITH(sbn(Tensor::ones({1, 2})), Catch::Contains("more than 1 value per channel"));
  CHECK(sbn.batches_tracked() == 0);
  CHECK_THROWS_WITH(sbn(Tensor::ones({4, 3})), Catch::Contains("expected 2 channels"));
  CHECK_THROWS_WITH(sbn(Tensor::ones({4})), Catch::Contains("(N, C), (N, C, L) or (N, C, H, W)"));
}

TEST_CASE("convert_sync_batchnorm swaps every BatchNorm, keeping values, keys and mode", "[single]") {
  models::MLPOptions o;
  o.norm = models::Norm::Batch;
  o.bn_momentum = std::nullopt;
  o.dtype = Dtype::Float64;
  Generator gen(2);
  auto net = std::make_shared<models::MLP>(std::vector<std::int64_t>{4, 6, 6, 2}, o, gen);
  net->named_buffers()[0].second.fill_(0.25);
  net->eval();
  const auto before = net->state_dict();
  const std::string repr_before = net->repr();
  layers::ModulePtr conv = dist::convert_sync_batchnorm(net);
  CHECK(conv == net);
  int syncs = 0;
  for (auto& [name, m] : net->named_modules()) {
    CHECK(m->type_name() != "BatchNorm1d");
    if (m->type_name() == "SyncBatchNorm") {
      ++syncs;
      CHECK_FALSE(m->is_training());
      CHECK_FALSE(static_cast<dist::SyncBatchNorm*>(m)->options.momentum.has_value());
    }
  }
  CHECK(syncs == 2);
  const auto after = net->state_dict();
  REQUIRE(after.keys() == before.keys());
  for (auto& [k, v] : before) CHECK(after.at(k).to_vector() == v.to_vector());
  // the forward runs the new modules (Sequential's own list was updated too)
  Tensor x = randn({3, 4}, Dtype::Float64, gen);
  {
    ModeChecksPause pause;  // fresh running statistics in eval mode, on purpose
    CHECK_NOTHROW((*net)(x));
  }
  CHECK(net->repr() != repr_before);
  // a BatchNorm itself is returned converted
  auto bn = std::make_shared<layers::BatchNorm2d>(3);
  CHECK(dist::convert_sync_batchnorm(bn)->type_name() == "SyncBatchNorm");
}

TEST_CASE("convert_sync_batchnorm refuses a fused BatchNorm1dReLU and fuse_modules leaves SyncBatchNorm alone",
          "[single][errors]") {
  Generator gen(3);
  auto fused = std::make_shared<models::MLP>(std::vector<std::int64_t>{4, 6, 2}, models::MLPOptions{.norm = models::Norm::Batch}, gen);
  REQUIRE(layers::fuse_modules(*fused).batch_norm_relu == 1);
  CHECK_THROWS_WITH(dist::convert_sync_batchnorm(fused),
                    "convert_sync_batchnorm: expected an unfused model, got a BatchNorm1dReLU (made by "
                    "layers::fuse_modules); convert first, then fuse (SyncBatchNorm is left unfused)");
  auto net = std::make_shared<models::MLP>(std::vector<std::int64_t>{4, 6, 2}, models::MLPOptions{.norm = models::Norm::Batch}, gen);
  dist::convert_sync_batchnorm(net);
  const auto r = layers::fuse_modules(*net);
  CHECK(r.batch_norm_relu == 0);
  CHECK((*net)[1]->type_name() == "SyncBatchNorm");
  CHECK((*net)[2]->type_name() == "ReLU");
}

TEST_CASE("DistributedSampler: disjoint shards covering the dataset, reshuffled per epoch", "[single][sampler]") {
  const int R = 3;
  for (bool drop_last : {false, true}) {
    const std::int64_t N = 10;
    std::vector<std::vector<std::int64_t>> shards;
    for (int r = 0; r < R; ++r) {
      dist::DistributedSampler s(N, R, r, {.shuffle = true, .seed = 42, .drop_last = drop_last});
      s.set_epoch(3);
      shards.push_back(s.indices());
      CHECK(static_cast<std::int64_t>(shards.back().size()) == (drop_last ? 3 : 4));
      CHECK(s.num_samples() == (drop_last ? 3 : 4));
    }
    std::multiset<std::int64_t> all;
    for (auto& sh : shards) all.insert(sh.begin(), sh.end());
    std::set<std::int64_t> distinct(all.begin(), all.end());
    if (drop_last) {
      CHECK(all.size() == 9);
      CHECK(distinct.size() == 9);  // disjoint, one sample dropped
    } else {
      CHECK(all.size() == 12);
      CHECK(distinct.size() == 10);  // every sample, two repeated as padding
    }
    for (auto i : all) CHECK((i >= 0 && i < N));
  }
  dist::DistributedSampler a(100, 2, 0, {.seed = 1});
  auto e0 = a.indices();
  CHECK(a.indices() == e0);  // same epoch, same order
  a.set_epoch(1);
  CHECK(a.indices() != e0);  // set_epoch reshuffles
  dist::DistributedSampler plain(5, 2, 1, {.shuffle = false});
  CHECK(plain.indices() == std::vector<std::int64_t>{1, 3, 0});  // strided, padded with the head
  CHECK_THROWS_WITH(dist::DistributedSampler(5, 2, 2), Catch::Contains("rank must be in [0, 2)"));
  CHECK_THROWS_WITH(dist::DistributedSampler(1, 2, 0, {.drop_last = true}), Catch::Contains("leaves nothing"));
}

TEST_CASE("DDP in a world of one leaves gradients unchanged", "[single]") {
  if (dist::world_size() != 1) return;
  models::MLPOptions o;
  o.dtype = Dtype::Float64;
  Generator gen(9);
  auto net = std::make_shared<models::MLP>(std::vector<std::int64_t>{3, 4, 2}, o, gen);
  dist::DistributedDataParallel ddp(net, {.bucket_cap_bytes = 64});
  Tensor x = randn({5, 3}, Dtype::Float64, gen);
  sum(ddp(x)).backward();
  std::vector<std::vector<double>> g;
  for (auto& p : net->parameters()) g.push_back(p.grad().to_vector());
  ddp.finish();
  std::size_t i = 0;
  for (auto& p : net->parameters()) CHECK(p.grad().to_vector() == g[i++]);
  sum(ddp(x)).backward();
  CHECK_THROWS_WITH(ddp(x), Catch::Contains("call finish()"));
  CHECK_THROWS_WITH(sum((*net)(x)).backward(), Catch::Contains("second backward before finish()"));
}
