// KFold (data/kfold.h): scikit-learn's fold sizes over an optional seeded permutation.
#include <tapegrad/data/kfold.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include <tapegrad/core/random.h>
#include <tapegrad/data/dataset.h>

namespace tapegrad::data {

namespace {
// 0..n-1, or its seeded permutation
std::vector<std::int64_t> index_order(std::int64_t n, const KFoldOptions& o) {
  if (o.shuffle) {
    Generator gen(o.seed);
    return randperm(n, gen);
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}
}  // namespace

KFold::KFold(KFoldOptions options) : o_(options) {
  if (o_.n_splits < 2)
    throw std::invalid_argument("KFold: expected n_splits >= 2, got " + std::to_string(o_.n_splits));
}

std::vector<std::int64_t> KFold::fold_ids(std::int64_t n) const {
  if (n < o_.n_splits)
    throw std::invalid_argument("KFold: cannot make n_splits = " + std::to_string(o_.n_splits) + " folds of " +
                                std::to_string(n) + " rows (expected at least " + std::to_string(o_.n_splits) +
                                " rows)");
  const std::vector<std::int64_t> order = index_order(n, o_);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  const std::int64_t base = n / o_.n_splits, extra = n % o_.n_splits;
  std::int64_t pos = 0;
  for (std::int64_t f = 0; f < o_.n_splits; ++f) {
    const std::int64_t size = base + (f < extra ? 1 : 0);
    for (std::int64_t j = 0; j < size; ++j) ids[static_cast<std::size_t>(order[static_cast<std::size_t>(pos + j)])] = f;
    pos += size;
  }
  return ids;
}

std::vector<Fold> KFold::split(std::int64_t n) const {
  const std::vector<std::int64_t> ids = fold_ids(n);
  const std::vector<std::int64_t> order = index_order(n, o_);  // test sets keep this order
  std::vector<Fold> folds(static_cast<std::size_t>(o_.n_splits));
  for (std::int64_t r : order) folds[static_cast<std::size_t>(ids[static_cast<std::size_t>(r)])].test.push_back(r);
  for (std::int64_t f = 0; f < o_.n_splits; ++f) {
    auto& train = folds[static_cast<std::size_t>(f)].train;
    train.reserve(static_cast<std::size_t>(n) - folds[static_cast<std::size_t>(f)].test.size());
    for (std::int64_t r = 0; r < n; ++r)
      if (ids[static_cast<std::size_t>(r)] != f) train.push_back(r);
  }
  return folds;
}

}  // namespace tapegrad::data
