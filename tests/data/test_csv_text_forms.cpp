// read_csv / parse_csv on the text forms other programs write: a UTF-8 byte-order mark,
// old Mac CR-only line ends, string labels with spaces around them.
#include <catch2/catch.hpp>

#include <string>

#include <tapegrad/data/csv.h>

using namespace tapegrad;
using namespace tapegrad::data;
using V = std::vector<double>;

TEST_CASE("parse_csv: a UTF-8 byte-order mark is not part of the first field", "[data][csv]") {
  const std::string bom = "\xEF\xBB\xBF";
  // header: the label named by the first column's name
  const Dataset d = parse_csv(bom + "label,x\ncat,1\ndog,2\n", {.label = "label"}, "bom.csv");
  CHECK(d.X.to_vector() == V{1, 2});
  CHECK(d.class_names == std::vector<std::string>{"cat", "dog"});
  // no header: the first number parses
  const Dataset n = parse_csv(bom + "1.5,2,0\n3,4,1\n", {.header = false}, "bom.csv");
  CHECK(n.X.to_vector() == V{1.5, 2, 3, 4});
  CHECK(n.y.to_vector() == V{0, 1});
  // a quoted first field after the mark
  const Dataset q = parse_csv(bom + "\"x\",y\n1,0\n", {.label = "y"}, "bom.csv");
  CHECK(q.X.to_vector() == V{1});
  // with skip_rows, the mark before the count line
  const Dataset s = parse_csv(bom + "2,1\nx,y\n1,0\n2,1\n", {.label = "y", .skip_rows = 1}, "bom.csv");
  CHECK(s.size() == 2);
  // a mark elsewhere stays data (an error naming the field)
  CHECK_THROWS_WITH(parse_csv("x,y\n" + bom + "1,0\n", {}, "bom.csv"), Catch::Contains("expected a number"));
}

TEST_CASE("parse_csv: CR-only line ends end lines and count in line numbers", "[data][csv]") {
  const Dataset d = parse_csv("x,y,label\r1,2,0\r3,4,1\r\r5,6,0", {.label = "label"}, "mac.csv");
  REQUIRE(d.size() == 3);
  CHECK(d.X.to_vector() == V{1, 2, 3, 4, 5, 6});
  CHECK(d.y.to_vector() == V{0, 1, 0});
  // a quoted field keeps its CR; line numbers count lone CRs
  const Dataset q = parse_csv("x,label\r1,\"a\rb\"\r2,c\r", {.label = "label"}, "mac.csv");
  CHECK(q.class_names == std::vector<std::string>{"a\rb", "c"});
  CHECK_THROWS_WITH(parse_csv("x,y\r1,0\r\r2,\r", {}, "mac.csv"), Catch::Contains("line 4") && Catch::Contains("missing"));
  // mixed line ends
  CHECK(parse_csv("x,y\r\n1,0\n2,1\r3,0\r\n", {}, "mix.csv").size() == 3);
  // skip_rows counts CR-only lines
  CHECK(parse_csv("9,9\rx,y\r1,0\r", {.skip_rows = 1}, "mac.csv").size() == 1);
}

TEST_CASE("parse_csv: string class labels are trimmed of spaces and tabs as numbers are", "[data][csv]") {
  const Dataset d = parse_csv("x,label\n1,cat\n2, cat\n3,dog \n4,\tdog\t\n", {.label = "label"}, "t.csv");
  CHECK(d.class_names == std::vector<std::string>{"cat", "dog"});
  CHECK(d.y.to_vector() == V{0, 0, 1, 1});
  CHECK_THROWS_WITH(parse_csv("x,label\n1,cat\n2,  \n", {.label = "label"}, "t.csv"),
                    Catch::Contains("line 3") && Catch::Contains("missing label"));
}
