// classification_report's default label set is scikit-learn's: the sorted classes that occur
// as a target or a prediction. Expected values: scikit-learn 1.2.1
// precision_recall_fscore_support / classification_report on the arrays below.
#include <catch2/catch.hpp>

#include <tapegrad/train/metrics.h>
#include "train/train_test_support.h"

using namespace tapegrad;
using namespace tapegrad::train;
using train_test::labels;

namespace {
// y_true [0 0 0 1 1 3 3 3 3 0 1 3], y_pred [0 1 0 1 1 0 3 3 1 0 4 4]: class 2 is in neither,
// class 4 only predicted.
ConfusionMatrix c54() {
  return confusion_matrix(labels({0, 1, 0, 1, 1, 0, 3, 3, 1, 0, 4, 4}),
                          labels({0, 0, 0, 1, 1, 3, 3, 3, 3, 0, 1, 3}));
}
}  // namespace

TEST_CASE("classification_report averages over the classes present in targets or predictions", "[train][metrics]") {
  const ClassificationReport r = classification_report(c54());
  REQUIRE(r.precision.size() == 5);  // per class: every index
  CHECK(r.support == std::vector<std::int64_t>{4, 3, 0, 5, 0});
  CHECK(r.precision[3] == 1.0);
  CHECK(r.recall[3] == Approx(0.4));
  // sklearn average='macro' (labels = unique_labels(y_true, y_pred) = [0 1 3 4])
  CHECK(r.macro_precision == Approx(0.5625).epsilon(1e-12));
  CHECK(r.macro_recall == Approx(0.4541666666666666).epsilon(1e-12));
  CHECK(r.macro_f1 == Approx(0.4732142857142858).epsilon(1e-12));
  CHECK(r.weighted_precision == Approx(0.7916666666666666).epsilon(1e-12));
  CHECK(r.weighted_recall == Approx(0.5833333333333334).epsilon(1e-12));
  CHECK(r.weighted_f1 == Approx(0.630952380952381).epsilon(1e-12));
  CHECK(r.accuracy == Approx(0.5833333333333334).epsilon(1e-12));
  // the text lists the four present classes, not class 2
  const std::string text = format_report(r, {"a", "b", "c", "d", "e"});
  CHECK_THAT(text, Catch::Contains(" d ") && Catch::Contains(" e ") && !Catch::Contains(" c "));
}

TEST_CASE("classification_report with explicit labels averages over exactly those", "[train][metrics]") {
  const ClassificationReport r = classification_report(c54(), {0, 1, 2, 3, 4});
  CHECK(r.labels == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  // sklearn labels=[0, 1, 2, 3, 4]: class 2 counts as 0/0/0
  CHECK(r.macro_precision == Approx(0.45).epsilon(1e-12));
  CHECK(r.macro_recall == Approx(0.3633333333333333).epsilon(1e-12));
  CHECK(r.macro_f1 == Approx(0.37857142857142867).epsilon(1e-12));
  CHECK(r.weighted_f1 == Approx(0.630952380952381).epsilon(1e-12));
  CHECK(classification_report(c54()).labels == std::vector<std::int64_t>{0, 1, 3, 4});
  // labels [0, 3]: macro precision (0.75 + 1) / 2, weighted by supports 4 and 5
  const ClassificationReport two = classification_report(c54(), {3, 0});
  CHECK(two.macro_precision == Approx(0.875));
  CHECK(two.weighted_recall == Approx((4 * 0.75 + 5 * 0.4) / 9));
  CHECK_THROWS_AS(classification_report(c54(), {0, 5}), std::invalid_argument);
  CHECK_THROWS_WITH(classification_report(c54(), {0, 5}), Catch::Contains("labels in [0, 5), got 5"));
  CHECK_THROWS_WITH(classification_report(c54(), {1, 1}), Catch::Contains("label 1 is given twice"));
}
