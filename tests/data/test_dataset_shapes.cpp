// Dataset of any rank, float (regression) targets, DataLoader batches in the dataset's
// shapes, reshaped views, and the Standardizer (per feature by default, global on request,
// its state as tensors).
#include <catch2/catch.hpp>

#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/dataset.h>

using namespace tapegrad;
using namespace tapegrad::data;
using V = std::vector<double>;

namespace {
// n images (1, 2, 2) with pixel values 10·i + j, labels i % 3
Dataset images(std::int64_t n) {
  std::vector<double> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 4; ++j) x.push_back(static_cast<double>(10 * i + j));
    y.push_back(i % 3);
  }
  return Dataset::make(Tensor::from_vector(x, {n, 1, 2, 2}), Tensor::from_int64(y, {n}));
}
}  // namespace

TEST_CASE("Dataset holds images (N, C, H, W) and DataLoader batches keep that shape", "[data]") {
  const Dataset d = images(5);
  CHECK(d.size() == 5);
  CHECK(d.num_features() == 4);
  CHECK(d.sample_shape() == Shape{1, 2, 2});
  CHECK(d.is_classification());
  CHECK(d.num_classes() == 3);
  const Dataset t = d.take({4, 0});
  CHECK(t.X.shape() == Shape{2, 1, 2, 2});
  CHECK(t.X.to_vector() == V{40, 41, 42, 43, 0, 1, 2, 3});
  CHECK(t.y.to_vector() == V{1, 0});
  CHECK(d.slice(1, 3).X.at(0) == 10);

  DataLoader loader(d, {.batch_size = 2});
  const Batch b = loader.batch(2);
  CHECK(b.X.shape() == Shape{1, 1, 2, 2});
  CHECK(b.X.to_vector() == V{40, 41, 42, 43});
  CHECK(b.y.to_vector() == V{1});
  // a rank's share of a batch
  const Batch part = loader.batch(0, 1, 1);
  CHECK(part.X.shape() == Shape{1, 1, 2, 2});
  CHECK(part.X.at(0) == 10);

  // shuffled: every sample exactly once, images intact
  Generator gen(3);
  DataLoader shuffled(d, {.batch_size = 2, .shuffle = true}, gen);
  std::vector<double> firsts;
  for (const Batch& s : shuffled)
    for (std::int64_t r = 0; r < s.size(); ++r) {
      const double p0 = s.X.at(r * 4);
      CHECK(s.X.at(r * 4 + 3) == p0 + 3);
      CHECK(s.y.at(r) == static_cast<double>(static_cast<std::int64_t>(p0 / 10) % 3));
      firsts.push_back(p0);
    }
  std::sort(firsts.begin(), firsts.end());
  CHECK(firsts == V{0, 10, 20, 30, 40});
}

TEST_CASE("Dataset holds float targets (N) and (N, k) for regression", "[data]") {
  const Tensor X = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2});
  const Dataset r1 = Dataset::make(X, Tensor::from_vector({0.5, 1.5, 2.5}, {3}));
  CHECK_FALSE(r1.is_classification());
  CHECK(r1.take({2}).y.to_vector() == V{2.5});
  CHECK_THROWS_AS(r1.num_classes(), std::logic_error);
  const Dataset r2 = Dataset::make(X, Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}));
  DataLoader loader(r2, {.batch_size = 2});
  CHECK(loader.batch(0).y.shape() == Shape{2, 2});
  CHECK(loader.batch(1).y.to_vector() == V{5, 6});
  // what make refuses, naming the shapes and dtypes
  CHECK_THROWS_WITH(Dataset::make(X, Tensor::from_vector({1, 2, 3}, {3}, Dtype::Float64)),
                    Catch::Contains("[3] float64"));
  CHECK_THROWS_WITH(Dataset::make(X, Tensor::zeros({3, 1, 1})), Catch::Contains("[3, 1, 1] float32"));
  CHECK_THROWS_WITH(Dataset::make(X, Tensor::from_int64({0, 1}, {2})), Catch::Contains("different N"));
  CHECK_THROWS_WITH(Dataset::make(X.to(Dtype::Float64), Tensor::from_int64({0, 1, 0}, {3})),
                    Catch::Contains("(N, *) float32") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(Dataset::make(X, Tensor::from_vector({0.5, 1.5, 2.5}, {3}), {"a"}),
                    Catch::Contains("class_names"));
  // class names count as classes even when the labels do not use the last one
  CHECK(Dataset::make(X, Tensor::from_int64({0, 1, 0}, {3}), {"a", "b", "c"}).num_classes() == 3);
}

TEST_CASE("Dataset::reshaped views rows as images, sharing storage", "[data]") {
  const Dataset rows = Dataset::make(Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4}), Tensor::from_int64({1, 0}, {2}));
  const Dataset img = rows.reshaped({1, 2, 2});
  CHECK(img.X.shape() == Shape{2, 1, 2, 2});
  CHECK(img.X.shares_storage_with(rows.X));
  CHECK(img.y.to_vector() == V{1, 0});
  CHECK_THROWS_WITH(rows.reshaped({1, 3, 3}), Catch::Contains("[2, 4]") && Catch::Contains("[2, 1, 3, 3]"));
}

TEST_CASE("Standardizer: per feature by default (StandardScaler), global on request", "[data]") {
  // numpy: X = [[1, 2], [3, 4], [5, 9]]; X.mean(0) = [3, 5], X.std(0) = [1.632993161855452, 2.943920288775949];
  // X.mean() = 4, X.std() = 2.581988897471611
  const Tensor X = Tensor::from_vector({1, 2, 3, 4, 5, 9}, {3, 2});
  const Standardizer per = Standardizer::fit(X);
  CHECK(per.per_feature());
  CHECK(per.mean() == V{3, 5});
  CHECK(per.stddev()[0] == Approx(1.632993161855452).epsilon(1e-15));
  CHECK(per.stddev()[1] == Approx(2.943920288775949).epsilon(1e-15));
  CHECK(per.transform(X).at(5) == Approx((9 - 5) / 2.943920288775949));
  const Standardizer glob = Standardizer::fit(X, Standardizer::Scope::Global);
  CHECK_FALSE(glob.per_feature());
  CHECK(glob.mean() == V{4});
  CHECK(glob.stddev()[0] == Approx(2.581988897471611).epsilon(1e-15));
  CHECK(glob.mean_tensor().shape() == Shape{1});
  CHECK(per.mean_tensor().to_vector() == V{3, 5});
  CHECK(per.std_tensor().dtype() == Dtype::Float64);

  // images: per feature is per (c, h, w) position; global accepts rows or images of 4 values
  const Dataset d = images(3);  // pixel j of image i = 10 i + j
  const Standardizer pi = Standardizer::fit(d.X);
  CHECK(pi.feature_shape() == Shape{1, 2, 2});
  CHECK(pi.mean() == V{10, 11, 12, 13});
  CHECK(pi.mean_tensor().shape() == Shape{1, 2, 2});
  CHECK(pi.transform(d).X.shape() == Shape{3, 1, 2, 2});
  CHECK(pi.transform(d).X.at(0) == Approx(-10 / 8.16496580927726));
  CHECK_THROWS_WITH(pi.transform(Tensor::zeros({2, 4})), Catch::Contains("(N, 1, 2, 2)") && Catch::Contains("[2, 4]"));
  const Standardizer gi = Standardizer::fit(d.X, Standardizer::Scope::Global);
  CHECK(gi.mean() == V{11.5});
  const Tensor as_rows = gi.transform(Tensor::from_vector({11.5, 0, 0, 0}, {1, 4}));
  CHECK(as_rows.at(0) == 0);
  CHECK_THROWS_WITH(gi.transform(Tensor::zeros({2, 5})), Catch::Contains("4 values per sample"));
}

TEST_CASE("Standardizer state_dict round trip and its errors", "[data]") {
  const Dataset d = images(4);
  for (auto scope : {Standardizer::Scope::PerFeature, Standardizer::Scope::Global}) {
    const Standardizer s = Standardizer::fit(d.X, scope);
    const auto state = s.state_dict();
    REQUIRE(state.size() == 3);
    CHECK(state[0].first == "mean");
    CHECK(state[1].first == "std");
    CHECK(state[2].first == "feature_shape");
    CHECK(state[2].second.to_vector() == V{1, 2, 2});
    const Standardizer r = Standardizer::from_state_dict(state);
    CHECK(r.scope() == scope);
    CHECK(r.mean() == s.mean());
    CHECK(r.stddev() == s.stddev());
    CHECK(r.feature_shape() == s.feature_shape());
    CHECK(r.transform(d.X).to_vector() == s.transform(d.X).to_vector());
  }
  auto state = Standardizer::fit(d.X).state_dict();
  CHECK_THROWS_WITH(Standardizer::from_state_dict({state[0], state[2]}), Catch::Contains("missing 'std'"));
  state[1].second = Tensor::from_vector({1, 2}, {2}, Dtype::Float64);
  CHECK_THROWS_WITH(Standardizer::from_state_dict(state), Catch::Contains("'std'") && Catch::Contains("[2]"));
  state[1].second = Tensor::from_vector({1, 1, 0, 1}, {1, 2, 2}, Dtype::Float64);
  CHECK_THROWS_WITH(Standardizer::from_state_dict(state), Catch::Contains("std > 0"));
}
