// The DataLoader's two default samplers: the plain order and a permutation per epoch.
#include <tapegrad/data/sampler.h>

#include <numeric>
#include <stdexcept>
#include <string>

#include <tapegrad/data/dataset.h>

namespace tapegrad::data {

namespace {
std::int64_t checked_size(const char* who, std::int64_t n) {
  if (n < 0) throw std::invalid_argument(std::string(who) + ": expected a dataset size >= 0, got " + std::to_string(n));
  return n;
}
}  // namespace

SequentialSampler::SequentialSampler(std::int64_t n) : n_(checked_size("SequentialSampler", n)) {}

std::vector<std::int64_t> SequentialSampler::epoch_indices() {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

RandomSampler::RandomSampler(std::int64_t n, Generator& gen) : n_(checked_size("RandomSampler", n)), gen_(&gen) {}

std::vector<std::int64_t> RandomSampler::epoch_indices() { return randperm(n_, *gen_); }

}  // namespace tapegrad::data
