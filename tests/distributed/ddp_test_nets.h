// The small nets and per-rank batches the DDP tests share: the same weights on every rank
// (seeded), different rows on every rank.
#pragma once

#include <cstdint>
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include <tapegrad/core/ops.h>
#include <tapegrad/core/random.h>
#include <tapegrad/distributed/environment.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/models/mlp.h>

namespace ddp_test {

inline constexpr std::int64_t kIn = 10, kClasses = 3, kPerRank = 6;

/// models::MLP [kIn, 24, 16, kClasses] with BatchNorm (Linear-BatchNorm-ReLU blocks), weights
/// from Generator(21).
inline std::shared_ptr<tapegrad::models::MLP> bn_mlp(tapegrad::Dtype dtype) {
  tapegrad::models::MLPOptions o;
  o.norm = tapegrad::models::Norm::Batch;
  o.dtype = dtype;
  tapegrad::Generator gen(21);
  return std::make_shared<tapegrad::models::MLP>(std::vector<std::int64_t>{kIn, 24, 16, kClasses}, o, gen);
}

/// This rank's kPerRank rows (x, class labels) of step s.
inline std::pair<tapegrad::Tensor, tapegrad::Tensor> mlp_batch(int s, tapegrad::Dtype dtype) {
  tapegrad::Generator gen(1000 * static_cast<std::uint64_t>(s) +
                          static_cast<std::uint64_t>(tapegrad::distributed::rank()));
  tapegrad::Tensor x = tapegrad::randn({kPerRank, kIn}, dtype, gen);
  std::vector<std::int64_t> y;
  for (int i = 0; i < kPerRank; ++i) y.push_back(gen.randint(kClasses));
  return {x, tapegrad::Tensor::from_int64(y, {kPerRank})};
}

/// Linear(3 -> 4) - BatchNorm1d(4) - Linear(4 -> 1), float64, default initialisation (the same
/// on every rank).
inline std::shared_ptr<tapegrad::layers::Sequential> small_net() {
  using namespace tapegrad;
  return std::make_shared<layers::Sequential>(std::initializer_list<layers::ModulePtr>{
      std::make_shared<layers::Linear>(3, 4, true, Dtype::Float64),
      std::make_shared<layers::BatchNorm1d>(4, layers::BatchNormOptions{.dtype = Dtype::Float64}),
      std::make_shared<layers::Linear>(4, 1, true, Dtype::Float64)});
}

/// 6 × 3 float64 rows from Generator(seed).
inline tapegrad::Tensor small_rows(std::uint64_t seed) {
  tapegrad::Generator gen(seed);
  return tapegrad::randn({6, 3}, tapegrad::Dtype::Float64, gen);
}

/// PyTorch's broadcast_buffers done by hand: every rank gets rank 0's buffers (a sum in which the
/// other ranks contribute zeros).
inline void copy_rank0_buffers(tapegrad::layers::Module& m) {
  for (auto& b : m.buffers()) {
    std::vector<double> v = b.to_vector();
    if (tapegrad::distributed::rank() != 0) std::fill(v.begin(), v.end(), 0.0);
    tapegrad::distributed::allreduce_sum(v.data(), static_cast<std::int64_t>(v.size()));
    b.copy_(tapegrad::Tensor::from_vector(v, b.shape(), tapegrad::Dtype::Float64).to(b.dtype()));
  }
}

}  // namespace ddp_test
