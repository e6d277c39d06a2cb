#include <tapegrad/distributed/distributed_sampler.h>

#include <numeric>
#include <stdexcept>
#include <string>

#include <tapegrad/core/random.h>
#include <tapegrad/core/shape.h>

namespace tapegrad::distributed {

DistributedSampler::DistributedSampler(std::int64_t n, int replicas, int rank, DistributedSamplerOptions options)
    : n_(n), replicas_(replicas), rank_(rank), options_(options) {
  if (n < 0) throw std::invalid_argument("DistributedSampler: dataset_size must be >= 0, got " + std::to_string(n));
  if (replicas < 1)
    throw std::invalid_argument("DistributedSampler: num_replicas must be >= 1, got " + std::to_string(replicas));
  if (rank < 0 || rank >= replicas)
    throw std::invalid_argument("DistributedSampler: rank must be in [0, " + std::to_string(replicas) + "), got " +
                                std::to_string(rank));
  if (options.drop_last) {
    if (n < replicas)
      throw std::invalid_argument("DistributedSampler: drop_last with " + std::to_string(n) +
                                  " samples for " + std::to_string(replicas) + " replicas leaves nothing");
    num_samples_ = n / replicas;
  } else {
    num_samples_ = ceil_div(n, replicas);
  }
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_));
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    Generator gen(options_.seed + static_cast<std::uint64_t>(epoch_));
    for (std::int64_t i = n_ - 1; i > 0; --i)
      std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(gen.randint(i + 1))]);
  }
  const std::int64_t total = total_size();
  if (options_.drop_last) {
    order.resize(static_cast<std::size_t>(total));
  } else {  // pad by repeating the head (as many times as needed)
    for (std::int64_t k = 0; static_cast<std::int64_t>(order.size()) < total && n_ > 0; ++k)
      order.push_back(order[static_cast<std::size_t>(k % n_)]);
  }
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  for (std::int64_t i = rank_; i < total; i += replicas_) mine.push_back(order[static_cast<std::size_t>(i)]);
  return mine;
}

}  // namespace tapegrad::distributed
