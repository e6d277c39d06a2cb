#pragma once
// KFold: k-fold cross-validation splits, as scikit-learn's sklearn.model_selection.KFold.
//
//   data::KFold kf({.n_splits = 5, .shuffle = true, .seed = 0});
//   for (const data::Fold& f : kf.split(ds.size())) {
//     data::Dataset train = ds.take(f.train), test = ds.take(f.test);
//     ...
//   }
//
// The N indices (0..N-1, or a permutation of them from Generator(seed) with shuffle) are cut
// into n_splits consecutive blocks; block i is fold i's test set and the other indices its
// training set. Sizes as scikit-learn's: the first N % n_splits folds have N / n_splits + 1
// test rows, the others N / n_splits. Every index is in exactly one test set. The permutation
// is data::randperm's (Fisher–Yates on mt19937_64), not numpy's, so the same seed gives other
// folds than scikit-learn's KFold(random_state=seed); use fold_ids() to hand tapegrad's folds
// to another program.
#include <cstdint>
#include <vector>

namespace tapegrad::data {

/// How KFold splits: number of folds, whether to shuffle the indices first, and the seed.
struct KFoldOptions {
  std::int64_t n_splits = 5;  ///< >= 2 (scikit-learn's default 5)
  bool shuffle = false;       ///< false: fold i tests a contiguous block of rows in file order
  std::uint64_t seed = 0;     ///< the Generator seed of the shuffle (ignored without shuffle)
};

/// One split: the rows to train on and the rows to test on.
struct Fold {
  /// Training indices, ascending (scikit-learn's train_index).
  std::vector<std::int64_t> train;
  /// Test indices, in permutation order (ascending without shuffle), as scikit-learn's test_index.
  std::vector<std::int64_t> test;
};

/// k-fold cross-validation splitter (see the top of this header).
class KFold {
 public:
  /// Throws std::invalid_argument for n_splits < 2.
  explicit KFold(KFoldOptions options = {});
  /// The n_splits folds of N = n rows. Throws std::invalid_argument naming n and n_splits when
  /// n < n_splits (a fold would be empty).
  std::vector<Fold> split(std::int64_t n) const;
  /// For each of the n rows, the fold whose test set holds it (0 .. n_splits - 1): the same
  /// assignment as split(n), as one vector (e.g. to write next to the data for another
  /// program to use the same folds). Throws as split.
  std::vector<std::int64_t> fold_ids(std::int64_t n) const;
  /// The options given.
  const KFoldOptions& options() const { return o_; }

 private:
  KFoldOptions o_;
};

}  // namespace tapegrad::data
