// data::KFold: folds partition the indices, scikit-learn's fold sizes and (without shuffle)
// its exact folds, seeded shuffles, fold_ids agreeing with split, and its errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>

#include <tapegrad/data/kfold.h>

using namespace tapegrad::data;
using I = std::vector<std::int64_t>;

namespace {
// Every index in exactly one test set; each fold's train is the complement of its test, ascending.
void check_partition(const std::vector<Fold>& folds, std::int64_t n) {
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  for (const Fold& f : folds) {
    for (std::int64_t i : f.test) {
      REQUIRE(i >= 0);
      REQUIRE(i < n);
      ++seen[static_cast<std::size_t>(i)];
    }
    CHECK(std::is_sorted(f.train.begin(), f.train.end()));
    CHECK(f.train.size() + f.test.size() == static_cast<std::size_t>(n));
    const std::set<std::int64_t> test(f.test.begin(), f.test.end());
    CHECK(test.size() == f.test.size());
    for (std::int64_t i : f.train) CHECK(test.count(i) == 0);
  }
  for (int s : seen) CHECK(s == 1);
}
}  // namespace

TEST_CASE("KFold without shuffle gives scikit-learn's folds", "[data][kfold]") {
  // sklearn.model_selection.KFold(5).split(np.arange(12)): test folds
  // [0 1 2] [3 4 5] [6 7] [8 9] [10 11]
  const auto folds = KFold({.n_splits = 5}).split(12);
  REQUIRE(folds.size() == 5);
  CHECK(folds[0].test == I{0, 1, 2});
  CHECK(folds[1].test == I{3, 4, 5});
  CHECK(folds[2].test == I{6, 7});
  CHECK(folds[3].test == I{8, 9});
  CHECK(folds[4].test == I{10, 11});
  CHECK(folds[2].train == I{0, 1, 2, 3, 4, 5, 8, 9, 10, 11});
  check_partition(folds, 12);
}

TEST_CASE("KFold sizes: the first n % k folds are one larger", "[data][kfold]") {
  for (std::int64_t k : I{2, 3, 5, 7}) {
    for (std::int64_t n : I{k, k + 1, 23, 100, 569, 1797}) {
      for (bool shuffle : {false, true}) {
        const auto folds = KFold({.n_splits = k, .shuffle = shuffle, .seed = 3}).split(n);
        REQUIRE(folds.size() == static_cast<std::size_t>(k));
        for (std::int64_t f = 0; f < k; ++f)
          CHECK(static_cast<std::int64_t>(folds[static_cast<std::size_t>(f)].test.size()) == n / k + (f < n % k ? 1 : 0));
        check_partition(folds, n);
      }
    }
  }
  // 1797 digits in 5 folds: 360 360 359 359 359, as sklearn's
  const auto d = KFold().split(1797);
  CHECK(d[0].test.size() == 360);
  CHECK(d[1].test.size() == 360);
  CHECK(d[2].test.size() == 359);
}

TEST_CASE("KFold shuffle: the seed decides the folds", "[data][kfold]") {
  const auto a = KFold({.n_splits = 5, .shuffle = true, .seed = 7}).split(50);
  const auto b = KFold({.n_splits = 5, .shuffle = true, .seed = 7}).split(50);
  const auto c = KFold({.n_splits = 5, .shuffle = true, .seed = 8}).split(50);
  const auto plain = KFold({.n_splits = 5}).split(50);
  for (std::size_t f = 0; f < 5; ++f) CHECK(a[f].test == b[f].test);
  bool differs_seed = false, differs_plain = false;
  for (std::size_t f = 0; f < 5; ++f) {
    differs_seed |= a[f].test != c[f].test;
    differs_plain |= a[f].test != plain[f].test;
  }
  CHECK(differs_seed);
  CHECK(differs_plain);
  // the test rows of a shuffled fold are not one contiguous block
  I t0 = a[0].test;
  std::sort(t0.begin(), t0.end());
  CHECK(t0.back() - t0.front() + 1 > static_cast<std::int64_t>(t0.size()));
}

TEST_CASE("KFold fold_ids agrees with split", "[data][kfold]") {
  const KFold kf({.n_splits = 4, .shuffle = true, .seed = 11});
  const I ids = kf.fold_ids(30);
  const auto folds = kf.split(30);
  REQUIRE(ids.size() == 30);
  for (std::size_t f = 0; f < folds.size(); ++f)
    for (std::int64_t r : folds[f].test) CHECK(ids[static_cast<std::size_t>(r)] == static_cast<std::int64_t>(f));
  CHECK(KFold({.n_splits = 3}).fold_ids(7) == I{0, 0, 0, 1, 1, 2, 2});
}

TEST_CASE("KFold errors name the expected and actual values", "[data][kfold][errors]") {
  CHECK_THROWS_WITH(KFold({.n_splits = 1}), "KFold: expected n_splits >= 2, got 1");
  CHECK_THROWS_WITH(KFold({.n_splits = 5}).split(4),
                    "KFold: cannot make n_splits = 5 folds of 4 rows (expected at least 5 rows)");
  CHECK_THROWS_AS(KFold().fold_ids(0), std::invalid_argument);
}
