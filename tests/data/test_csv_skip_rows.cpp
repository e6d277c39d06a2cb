// read_csv's skip_rows: a count line above the header (scikit-learn's bundled digits.csv.gz
// and breast_cancer.csv); its errors, and line numbers counting the skipped lines.
#include <catch2/catch.hpp>

#include <tapegrad/data/csv.h>

using namespace tapegrad;
using namespace tapegrad::data;

namespace {
// sklearn's layout: "n_samples,n_features,class names..." then rows without a header
constexpr const char* kCounted = "3,2,a,b\n0.5,1,0\n-2,3,1\n4,0.25,1\n";
}  // namespace

TEST_CASE("read_csv skip_rows skips a count line above the data", "[data][csv]") {
  // without skipping, the count line is read as data and its class names are no numbers
  CHECK_THROWS_WITH(parse_csv(kCounted, {.header = false}, "c.csv"),
                    "read_csv: 'c.csv' line 1: column (index 2): expected a number, got 'a'");
  const Dataset d = parse_csv(kCounted, {.label = -1, .header = false, .skip_rows = 1}, "c.csv");
  REQUIRE(d.X.shape() == Shape{3, 2});
  CHECK(d.X.data<float>()[0] == 0.5f);
  CHECK(d.X.data<float>()[2] == -2.0f);
  CHECK(d.X.data<float>()[5] == 0.25f);
  CHECK(d.y.data<std::int64_t>()[0] == 0);
  CHECK(d.y.data<std::int64_t>()[2] == 1);
  // a header after the skipped lines still names the columns
  const Dataset h = parse_csv("# comment, with a comma\nx,y,label\n1,2,0\n3,4,1\n", {.label = "label", .skip_rows = 1});
  CHECK(h.X.shape() == Shape{2, 2});
  CHECK(h.y.data<std::int64_t>()[1] == 1);
}

TEST_CASE("read_csv skip_rows: line numbers count the skipped lines; errors", "[data][csv][errors]") {
  CHECK_THROWS_WITH(parse_csv("3,2\n1,2,0\n1,x,1\n", {.header = false, .skip_rows = 1}, "s.csv"),
                    Catch::Contains("'s.csv' line 3") && Catch::Contains("(index 1)") &&
                        Catch::Contains("expected a number, got 'x'"));
  CHECK_THROWS_WITH(parse_csv("a\nb\n", {.skip_rows = -1}, "n.csv"),
                    "read_csv: 'n.csv': expected skip_rows >= 0, got -1");
  CHECK_THROWS_WITH(parse_csv("a,b\n1,2\n", {.skip_rows = 2}, "all.csv"),
                    "read_csv: 'all.csv': skip_rows = 2 skips every line (the file has 2 lines)");
  CHECK_THROWS_WITH(parse_csv("a,b\n1,2", {.skip_rows = 5}, "all.csv"),
                    "read_csv: 'all.csv': skip_rows = 5 skips every line (the file has 2 lines)");
}
