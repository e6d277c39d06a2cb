// Errors of data::KFold and read_csv's skip_rows (docs/errors.md rows), and line numbers in
// read_csv's messages counting the skipped lines.
#include <catch2/catch.hpp>

#include <tapegrad/data/csv.h>
#include <tapegrad/data/kfold.h>

using namespace tapegrad;
using namespace tapegrad::data;

TEST_CASE("KFold errors name the expected and actual values", "[data][kfold][errors]") {
  CHECK_THROWS_WITH(KFold({.n_splits = 1}), "KFold: expected n_splits >= 2, got 1");
  CHECK_THROWS_WITH(KFold({.n_splits = 5}).split(4),
                    "KFold: cannot make n_splits = 5 folds of 4 rows (expected at least 5 rows)");
  CHECK_THROWS_AS(KFold().fold_ids(0), std::invalid_argument);
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
