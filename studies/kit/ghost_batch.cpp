#include "kit/ghost_batch.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/ops.h>

namespace studies::kit {

using namespace tapegrad;

GhostBatchNorm::GhostBatchNorm(std::shared_ptr<layers::BatchNormBase> bn, int replicas)
    : bn_(std::move(bn)), replicas_(replicas) {
  if (!bn_) throw std::invalid_argument("GhostBatchNorm: expected a BatchNorm module, got null");
  if (replicas < 1) throw std::invalid_argument("GhostBatchNorm: replicas must be >= 1, got " + std::to_string(replicas));
  register_module("bn", bn_);
}

std::string GhostBatchNorm::extra_repr() const { return "replicas=" + std::to_string(replicas_); }

Tensor GhostBatchNorm::forward(const Tensor& x) {
  if (!is_training() || replicas_ == 1) return (*bn_)(x);
  const std::int64_t n = x.size(0);
  if (n % replicas_ != 0)
    throw std::invalid_argument("GhostBatchNorm: a train-mode batch must split into " + std::to_string(replicas_) +
                                " equal replica batches, got " + std::to_string(n) + " rows");
  const std::int64_t m = n / replicas_;
  std::vector<Tensor> bufs = bn_->buffers();
  std::vector<Tensor> start, rank0;
  for (const auto& b : bufs) start.push_back(b.clone());
  std::vector<Tensor> outs;
  outs.reserve(static_cast<std::size_t>(replicas_));
  for (int r = 0; r < replicas_; ++r) {
    if (r > 0)
      for (std::size_t i = 0; i < bufs.size(); ++i) bufs[i].copy_(start[i]);  // broadcast rank 0's buffers
    outs.push_back((*bn_)(narrow(x, 0, r * m, m)));
    if (r == 0)
      for (const auto& b : bufs) rank0.push_back(b.clone());
  }
  for (std::size_t i = 0; i < bufs.size(); ++i) bufs[i].copy_(rank0[i]);
  return cat(outs, 0);
}

}  // namespace studies::kit
