// train/metrics.h: worked examples with scikit-learn's definitions (accuracy_score,
// top_k_accuracy_score, confusion_matrix, precision_recall_fscore_support with
// zero_division=0, mean_squared_error, mean_absolute_error, r2_score). The expected values
// are worked out by hand in the comments; tests/train/sklearn_metrics.py prints sklearn's.
#include <catch2/catch.hpp>

#include <limits>

#include <tapegrad/train/metrics.h>
#include "train/train_test_support.h"

using namespace tapegrad;
using namespace tapegrad::train;
using train_test::labels;

TEST_CASE("accuracy from class indices and from logits (first maximum)", "[train][metrics]") {
  // y_true [0 1 2 2 1], y_pred [0 2 2 2 1]: 4 of 5.
  CHECK(accuracy(labels({0, 2, 2, 2, 1}), labels({0, 1, 2, 2, 1})) == 0.8);
  // Scores: row argmax [1, 0, 2] (row 1 ties 0 and 2: the first maximum, 0), targets [1 0 0].
  const Tensor scores = Tensor::from_vector({0.1, 0.7, 0.2, 0.5, 0.1, 0.5, 0.2, 0.3, 0.9}, {3, 3}, Dtype::Float32);
  CHECK(accuracy(scores, labels({1, 0, 0})) == Approx(2.0 / 3.0));
  CHECK_THROWS_WITH(accuracy(labels({0, 1}), labels({0, 1, 2})),
                    Catch::Contains("2 predictions and 3 targets"));
  CHECK_THROWS_WITH(accuracy(labels({}), labels({})), Catch::Contains("at least one row"));
  CHECK_THROWS_WITH(accuracy(Tensor::from_vector({1.0, 2.0}, {2}, Dtype::Float32), labels({0, 1})),
                    Catch::Contains("expected class indices (N) int64 or scores (N, C) float") &&
                        Catch::Contains("[2] float32"));
}

TEST_CASE("top-k accuracy counts ties as sklearn's stable argsort does", "[train][metrics]") {
  // sklearn's docstring example: y_true [0 1 2 2], scores rows
  //   [0.5 0.2 0.2] [0.3 0.4 0.2] [0.2 0.4 0.3] [0.7 0.2 0.1]; top_k_accuracy_score(k=2) = 0.75.
  const Tensor s = Tensor::from_vector({0.5, 0.2, 0.2, 0.3, 0.4, 0.2, 0.2, 0.4, 0.3, 0.7, 0.2, 0.1}, {4, 3},
                                       Dtype::Float64);
  const Tensor y = labels({0, 1, 2, 2});
  CHECK(top_k_accuracy(s, y, 2) == 0.75);
  CHECK(top_k_accuracy(s, y, 1) == 0.5);  // argmax rows: 0 1 1 0
  CHECK(top_k_accuracy(s, y, 3) == 1.0);
  CHECK(top_k_accuracy(s, y, 7) == 1.0);
  // Ties: scores [1 1 1], true class 0: sorted descending by stable argsort reversed is 2 1 0,
  // so class 0 is third: in the top 3, not the top 2; class 2 is first.
  const Tensor tie = Tensor::from_vector({1.0, 1.0, 1.0}, {1, 3}, Dtype::Float32);
  CHECK(top_k_accuracy(tie, labels({0}), 2) == 0.0);
  CHECK(top_k_accuracy(tie, labels({0}), 3) == 1.0);
  CHECK(top_k_accuracy(tie, labels({2}), 1) == 1.0);
  CHECK_THROWS_WITH(top_k_accuracy(s, y, 0), Catch::Contains("k >= 1, got 0"));
  CHECK_THROWS_WITH(top_k_accuracy(s, labels({0, 1, 3, 2}), 1), Catch::Contains("target 3 of row 2 outside [0, 3)"));
}

TEST_CASE("confusion matrix and the per-class report", "[train][metrics]") {
  // y_true [0 0 0 1 1 2 2 2 2 3], y_pred [0 1 0 1 2 2 2 0 2 2]; class 3 is never predicted.
  const Tensor t = labels({0, 0, 0, 1, 1, 2, 2, 2, 2, 3});
  const Tensor p = labels({0, 1, 0, 1, 2, 2, 2, 0, 2, 2});
  const ConfusionMatrix m = confusion_matrix(p, t);
  const ConfusionMatrix expected = {{2, 1, 0, 0}, {0, 1, 1, 0}, {1, 0, 3, 0}, {0, 0, 1, 0}};
  REQUIRE(m == expected);
  CHECK(confusion_matrix(p, t, 5).size() == 5);
  CHECK_THROWS_WITH(confusion_matrix(p, t, 3), Catch::Contains("label 3 of row 9 outside [0, 3)"));

  const ClassificationReport r = classification_report(m);
  // precision = tp / column sum: 2/3, 1/2, 3/5, 0 (never predicted: zero_division 0)
  // recall    = tp / row sum:    2/3, 1/2, 3/4, 0
  // f1 = 2pr/(p+r): 2/3, 1/2, 2·0.6·0.75/1.35 = 2/3, 0
  CHECK(r.precision[0] == Approx(2.0 / 3));
  CHECK(r.precision[1] == Approx(0.5));
  CHECK(r.precision[2] == Approx(0.6));
  CHECK(r.precision[3] == 0.0);
  CHECK(r.recall[2] == Approx(0.75));
  CHECK(r.recall[3] == 0.0);
  CHECK(r.f1[2] == Approx(2.0 / 3));
  CHECK(r.f1[3] == 0.0);
  CHECK(r.support == std::vector<std::int64_t>{3, 2, 4, 1});
  CHECK(r.accuracy == Approx(0.6));
  // macro: means over 4 classes; weighted by support 3, 2, 4, 1 over 10.
  CHECK(r.macro_precision == Approx((2.0 / 3 + 0.5 + 0.6 + 0) / 4));  // 0.441667
  CHECK(r.macro_recall == Approx((2.0 / 3 + 0.5 + 0.75) / 4));        // 0.479167
  CHECK(r.macro_f1 == Approx((2.0 / 3 + 0.5 + 2.0 / 3) / 4));         // 0.458333
  CHECK(r.weighted_precision == Approx((3 * 2.0 / 3 + 2 * 0.5 + 4 * 0.6) / 10));  // 0.54
  CHECK(r.weighted_recall == Approx(0.6));                                     // = accuracy
  CHECK(r.weighted_f1 == Approx((3 * 2.0 / 3 + 2 * 0.5 + 4 * 2.0 / 3) / 10));  // 0.566667

  const std::string text = format_report(r, {"cat", "dog", "bird", "fish"});
  CHECK_THAT(text, Catch::Contains("bird") && Catch::Contains("0.6000") && Catch::Contains("weighted avg"));
  CHECK_THAT(format_confusion(m, {"cat"}), Catch::Contains("0 cat") && Catch::Contains("rows: true class"));

  CHECK_THROWS_WITH(classification_report({}), Catch::Contains("0 classes"));
  CHECK_THROWS_WITH(classification_report({{1, 2}, {3}}), Catch::Contains("row 1 has 1"));
}

TEST_CASE("regression metrics: MSE, MAE, R² with sklearn's multioutput average and constant targets", "[train][metrics]") {
  // sklearn's docstring examples: y_true [3, -0.5, 2, 7], y_pred [2.5, 0, 2, 8]:
  // MSE 0.375, MAE 0.5, R² 0.948608... (= 1 - 1.5 / 29.1875).
  const Tensor y = Tensor::from_vector({3, -0.5, 2, 7}, {4}, Dtype::Float64);
  const Tensor p = Tensor::from_vector({2.5, 0.0, 2, 8}, {4}, Dtype::Float32);
  CHECK(mean_squared_error(p, y.to(Dtype::Float32)) == Approx(0.375));
  CHECK(mean_absolute_error(p, y.to(Dtype::Float32)) == Approx(0.5));
  CHECK(r2_score(p, y.to(Dtype::Float32)) == Approx(1.0 - 1.5 / 29.1875));
  // Two outputs: y_true [[0.5, 1], [-1, 1], [7, -6]], y_pred [[0, 2], [-1, 2], [8, -5]]:
  // MSE per output 0.41667, 1 -> 0.708333; MAE 0.5, 1 -> 0.75; R² (uniform) 0.936...
  const Tensor y2 = Tensor::from_vector({0.5, 1, -1, 1, 7, -6}, {3, 2}, Dtype::Float64);
  const Tensor p2 = Tensor::from_vector({0, 2, -1, 2, 8, -5}, {3, 2}, Dtype::Float64);
  CHECK(mean_squared_error(p2, y2) == Approx(0.7083333333));
  CHECK(mean_absolute_error(p2, y2) == Approx(0.75));
  // output 0: ss_res 0.25 + 0 + 1 = 1.25, mean 6.5/3, ss_tot = 36.1666...; output 1: ss_res 3,
  // mean -4/3, ss_tot 32.6667: R² = ((1 - 1.25/36.16667) + (1 - 3/32.66667)) / 2 = 0.93680
  const double r2_0 = 1 - 1.25 / (0.5 * 0.5 + 1 + 49 - 3 * (6.5 / 3) * (6.5 / 3));
  const double r2_1 = 1 - 3.0 / (1 + 1 + 36 - 3 * (4.0 / 3) * (4.0 / 3));
  CHECK(r2_score(p2, y2) == Approx((r2_0 + r2_1) / 2));
  // Constant target: 1 for an exact prediction, else 0 (sklearn's force_finite).
  const Tensor c = Tensor::from_vector({2, 2, 2}, {3}, Dtype::Float64);
  CHECK(r2_score(c, c) == 1.0);
  CHECK(r2_score(Tensor::from_vector({2, 2, 3}, {3}, Dtype::Float64), c) == 0.0);
  CHECK_THROWS_WITH(mean_squared_error(p, Tensor::from_vector({1, 2}, {2}, Dtype::Float32)),
                    Catch::Contains("same shape, got [4] and [2]"));
  CHECK_THROWS_WITH(r2_score(Tensor::from_vector({1}, {1}, Dtype::Float64), Tensor::from_vector({1}, {1}, Dtype::Float64)),
                    Catch::Contains("at least 2 rows, got 1"));
  CHECK_THROWS_WITH(mean_absolute_error(labels({1, 2}), labels({1, 2})), Catch::Contains("float tensor"));
}

TEST_CASE("metrics refuse NaN or infinite scores and predictions instead of scoring them", "[train][metrics][errors]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor scores = Tensor::from_vector({0.1, 0.9, nan, nan, 0.8, 0.2}, {3, 2}, Dtype::Float32);
  const Tensor y = Tensor::from_int64({1, 0, 0}, {3});
  CHECK_THROWS_AS(accuracy(scores, y), std::runtime_error);
  CHECK_THROWS_WITH(accuracy(scores, y), Catch::Contains("accuracy: expected finite scores, got nan in row 1"));
  CHECK_THROWS_WITH(top_k_accuracy(scores, y, 1), Catch::Contains("top_k_accuracy: expected finite scores"));
  CHECK_THROWS_WITH(confusion_matrix(scores, y, 2), Catch::Contains("confusion_matrix: expected finite scores"));
  CHECK_THROWS_WITH(predicted_classes(scores), Catch::Contains("predicted_classes: expected finite scores"));
  const Tensor pred = Tensor::from_vector({1.0, std::numeric_limits<double>::infinity(), 3.0}, {3}, Dtype::Float64);
  const Tensor target = Tensor::from_vector({1.0, 2.0, 3.0}, {3}, Dtype::Float64);
  CHECK_THROWS_WITH(r2_score(pred, target), Catch::Contains("r2_score: expected finite predictions, got inf in row 1"));
  CHECK_THROWS_WITH(mean_squared_error(target, pred), Catch::Contains("mean_squared_error: expected finite targets"));
  CHECK(r2_score(target, target) == 1.0);
}
