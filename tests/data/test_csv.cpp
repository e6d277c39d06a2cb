// read_csv / parse_csv: values, labels (integers, strings in sorted order, regression),
// header or none, delimiters, RFC 4180 quoting, CRLF, gzip, and every error naming the
// file, the line and the column.
#include <catch2/catch.hpp>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <tapegrad/data/csv.h>
#include <tapegrad/data/dataloader.h>

#include "temp_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
using V = std::vector<double>;
namespace fs = std::filesystem;

namespace {

struct CsvDir : tapegrad::test::TempDir {
  CsvDir() : TempDir("tapegrad_csv") {}
  std::string write(const std::string& name, const std::string& text, bool gzip = false) const {
    const std::string p = (path / name).string();
    if (gzip) {
      gzFile f = gzopen(p.c_str(), "wb");
      REQUIRE(f != nullptr);
      REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
      REQUIRE(gzclose(f) == Z_OK);
    } else {
      std::ofstream(p, std::ios::binary) << text;
    }
    return p;
  }
};

const char* kIris =
    "sepal_length,sepal_width,petal_length,species\n"
    "5.1,3.5,1.4,setosa\n"
    "7.0,3.2,4.7,versicolor\n"
    "6.3,3.3,6.0,virginica\n"
    "4.9,3.0,1.4,setosa\n";

}  // namespace

TEST_CASE("read_csv: header, numeric features, string labels as sorted class indices", "[data][csv]") {
  CsvDir dir;
  const Dataset d = read_csv(dir.write("iris.csv", kIris), {.label = "species"});
  CHECK(d.X.shape() == Shape{4, 3});
  CHECK(d.X.dtype() == Dtype::Float32);
  CHECK(d.X.to_vector() == Tensor::from_vector({5.1, 3.5, 1.4, 7.0, 3.2, 4.7, 6.3, 3.3, 6.0, 4.9, 3.0, 1.4}, {4, 3})
                               .to_vector());
  CHECK(d.y.dtype() == Dtype::Int64);
  CHECK(d.y.to_vector() == V{0, 1, 2, 0});
  CHECK(d.class_names == std::vector<std::string>{"setosa", "versicolor", "virginica"});
  CHECK(d.num_classes() == 3);
  // the default label column is the last one: the same dataset
  CHECK(read_csv(dir.write("iris2.csv", kIris)).y.to_vector() == V{0, 1, 2, 0});
  // the label in the middle: the features are the other columns, in file order
  const char* numeric =
      "sepal_length,sepal_width,petal_length\n"
      "5.1,3.5,1.4\n"
      "7.0,3.2,4.7\n"
      "6.3,3.3,6.0\n"
      "4.9,3.0,1.4\n";
  const Dataset m = parse_csv(numeric, {.label = "sepal_width", .task = CsvTask::Regression});
  CHECK(m.X.shape() == Shape{4, 2});
  CHECK(m.X.at(0) == Approx(5.1f));
  CHECK(m.X.at(1) == Approx(1.4f));
  CHECK(m.y.dtype() == Dtype::Float32);
  CHECK(m.y.to_vector() == Tensor::from_vector({3.5, 3.2, 3.3, 3.0}, {4}).to_vector());
  CHECK(m.class_names.empty());
  // with a word among the features, regression names the cell
  CHECK_THROWS_WITH(parse_csv(kIris, {.label = "sepal_width", .task = CsvTask::Regression}),
                    Catch::Contains("line 2") && Catch::Contains("'species' (index 3)") &&
                        Catch::Contains("'setosa'"));
  // sorted is byte order: "B" < "a" < "b"
  CHECK(parse_csv("x,c\n1,b\n2,a\n3,B\n").class_names == std::vector<std::string>{"B", "a", "b"});
  CHECK(parse_csv("x,c\n1,b\n2,a\n3,B\n").y.to_vector() == V{2, 1, 0});
}

TEST_CASE("read_csv: integer labels are class indices; no header; other delimiters", "[data][csv]") {
  // labels by index 0, no header, ';' delimiter, CRLF line ends, '+' and exponents
  const Dataset d = parse_csv("2;1.5;-2\r\n0;+3;4e-1\r\n7;0;1E2\r\n", {.label = 0, .delimiter = ';', .header = false});
  CHECK(d.X.shape() == Shape{3, 2});
  CHECK(d.X.to_vector() == Tensor::from_vector({1.5, -2, 3, 0.4, 0, 100}, {3, 2}).to_vector());
  CHECK(d.y.to_vector() == V{2, 0, 7});
  CHECK(d.class_names.empty());
  CHECK(d.num_classes() == 8);
  // tab separated, label as the last column by negative index
  const Dataset t = parse_csv("a\tb\tlabel\n1\t2\t1\n3\t4\t0\n", {.label = -1, .delimiter = '\t'});
  CHECK(t.y.to_vector() == V{1, 0});
  CHECK(t.X.to_vector() == V{1, 2, 3, 4});
  // a label column with an integer and a word: all are strings
  const Dataset s = parse_csv("x,y\n1,10\n2,cat\n3,10\n");
  CHECK(s.class_names == std::vector<std::string>{"10", "cat"});
  CHECK(s.y.to_vector() == V{0, 1, 0});
  // spaces around numbers are allowed
  CHECK(parse_csv("x,y\n 1.25 , 3 \n").X.item() == 1.25);
  // an underflow reads as strtod does (0), an overflow is refused (below)
  CHECK(parse_csv("x,y\n1e-400,3\n").X.item() == 0);
}

TEST_CASE("read_csv: RFC 4180 quoting, empty lines, and the last line without newline", "[data][csv]") {
  // quoted header names with the delimiter and "" inside, a quoted number, a quoted label
  // spanning two lines, empty lines between rows
  const std::string text =
      "\"a, first\",\"b \"\"2\"\"\",label\n"
      "\"1.5\",2,\"two\nlines\"\n"
      "\n"
      "3,\"4\",plain\r\n"
      "\r\n"
      "5,6,plain";
  const Dataset d = parse_csv(text);
  CHECK(d.X.to_vector() == V{1.5, 2, 3, 4, 5, 6});
  CHECK(d.class_names == std::vector<std::string>{"plain", "two\nlines"});
  CHECK(d.y.to_vector() == V{1, 0, 0});
  // line numbers keep counting inside quoted fields and across empty lines: the bad
  // value is on line 9
  CHECK_THROWS_WITH(parse_csv(text + "\n\n7,x,plain\n", {}, "q.csv"),
                    Catch::Contains("'q.csv' line 9") && Catch::Contains("'b \"2\"' (index 1)") &&
                        Catch::Contains("'x'"));
  CHECK_THROWS_WITH(parse_csv("a,b\n1,\"2\"x\n", {}, "q.csv"),
                    Catch::Contains("line 2") && Catch::Contains("'b' (index 1)") &&
                        Catch::Contains("after the closing quote"));
  CHECK_THROWS_WITH(parse_csv("a,b\n1,0\n\"2,1\n3,0\n", {}, "q.csv"),
                    Catch::Contains("line 3") && Catch::Contains("'a' (index 0)") && Catch::Contains("never closed"));
}

TEST_CASE("read_csv: gzip files are recognised by their bytes", "[data][csv]") {
  CsvDir dir;
  const Dataset plain = read_csv(dir.write("iris.csv", kIris));
  const Dataset gz = read_csv(dir.write("iris.csv.gz", kIris, true));
  const Dataset gz_no_suffix = read_csv(dir.write("iris_gz", kIris, true));
  CHECK(gz.X.to_vector() == plain.X.to_vector());
  CHECK(gz.y.to_vector() == plain.y.to_vector());
  CHECK(gz_no_suffix.class_names == plain.class_names);
  CHECK_THROWS_AS(read_csv((dir.path / "missing.csv").string()), std::runtime_error);
  CHECK_THROWS_WITH(read_csv((dir.path / "missing.csv").string()), Catch::Contains("missing.csv"));
  // a parse error in a gzip file names the file and the line of the decompressed text
  CHECK_THROWS_WITH(read_csv(dir.write("bad.csv.gz", "a,b,c\n1,0,0\n2,?,1\n", true)),
                    Catch::Contains("bad.csv.gz' line 3") && Catch::Contains("'b' (index 1)"));
}

TEST_CASE("read_csv: bad input is an error naming the file, the line and the column", "[data][csv]") {
  using Catch::Contains;
  const std::string f = "f.csv";
  auto err = [&](const std::string& text, const CsvOptions& o = {}) {
    try {
      parse_csv(text, o, f);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    FAIL("no error for " << text);
    return std::string();
  };
  // ragged rows: too few and too many fields
  CHECK_THAT(err("a,b,label\n1,2,0\n3,4\n"), Contains("'f.csv' line 3") && Contains("expected 3 fields") &&
                                                   Contains("got 2") && Contains("'label' (index 2) is missing"));
  CHECK_THAT(err("a,b,label\n1,2,0,9\n"), Contains("line 2") && Contains("got 4") && Contains("(index 3)"));
  CHECK_THAT(err("1,2,0\n3,4\n", {.header = false}), Contains("line 2") && Contains("(as the first row)"));
  // missing (empty) values, in a feature and in the label
  CHECK_THAT(err("a,b,label\n1,,0\n"), Contains("line 2") && Contains("'b' (index 1)") && Contains("missing value"));
  CHECK_THAT(err("a,b,label\n1,2,\n3,4,cat\n"), Contains("line 2") && Contains("'label' (index 2)") &&
                                                    Contains("missing label"));
  CHECK_THAT(err("a,b,y\n1,2,\n", {.task = CsvTask::Regression}), Contains("'y' (index 2)") && Contains("missing"));
  // non-numeric and non-finite values
  CHECK_THAT(err("a,b,label\n1,2,0\n1,two,0\n"), Contains("line 3") && Contains("'b' (index 1)") &&
                                                     Contains("expected a number, got 'two'"));
  CHECK_THAT(err("a,b,label\n1,0x10,0\n"), Contains("'0x10'"));
  CHECK_THAT(err("a,b,label\nnan,2,0\n"), Contains("'a' (index 0)") && Contains("finite") && Contains("'nan'"));
  CHECK_THAT(err("a,b,label\n1,-inf,0\n"), Contains("'b' (index 1)") && Contains("finite"));
  CHECK_THAT(err("a,b,label\n1,1e39,0\n"), Contains("'b' (index 1)") && Contains("float32"));
  CHECK_THAT(err("1,2,0\n1,x,0\n", {.header = false}), Contains("line 2") && Contains("column (index 1)"));
  // a negative integer class label
  CHECK_THAT(err("a,label\n1,0\n2,-1\n"), Contains("line 3") && Contains("'label' (index 1)") && Contains(">= 0"));
  // the label column
  CHECK_THAT(err(kIris, {.label = "kind"}), Contains("'f.csv'") && Contains("no label column named 'kind'") &&
                                                Contains("'species'") && Contains("'sepal_length'"));
  // a label name that two header columns carry is ambiguous, not the first of them
  CHECK_THAT(err("a,a,y\n1,2,0\n3,4,1\n", {.label = "a"}),
             Contains("'f.csv'") && Contains("label column name 'a' names 2 columns (indices 0, 1)") &&
                 Contains("give its index"));
  CHECK_THAT(err(kIris, {.label = 4}), Contains("index 4 out of range for 4 columns"));
  CHECK_THAT(err(kIris, {.label = -5}), Contains("index -5"));
  CHECK_THAT(err("1,2\n", {.label = "y", .header = false}), Contains("no header"));
  // empty file, blank lines only, header only, one column, bad delimiter
  CHECK_THAT(err(""), Contains("'f.csv'") && Contains("no data rows") && Contains("empty"));
  CHECK_THAT(err("\n\r\n\n"), Contains("no data rows"));
  CHECK_THAT(err("a,b,label\n"), Contains("no data rows") && Contains("header only"));
  CHECK_THAT(err("a;b;label\n1;2;0\n"), Contains("at least 2 columns") && Contains("delimiter"));
  CHECK_THAT(err("a,b\n1,2\n", {.delimiter = '"'}), Contains("delimiter"));
}

TEST_CASE("read_csv feeds a DataLoader: batches in the dataset's shapes", "[data][csv]") {
  std::string text = "x1,x2,target\n";
  for (int i = 0; i < 10; ++i) text += std::to_string(i) + "," + std::to_string(2 * i) + "," + std::to_string(i * 0.5) + "\n";
  const Dataset d = parse_csv(text, {.task = CsvTask::Regression});
  DataLoader loader(d, {.batch_size = 4});
  std::vector<Shape> xs, ys;
  for (const Batch& b : loader) {
    xs.push_back(b.X.shape());
    ys.push_back(b.y.shape());
    CHECK(b.y.dtype() == Dtype::Float32);
  }
  CHECK(xs == std::vector<Shape>{{4, 2}, {4, 2}, {2, 2}});
  CHECK(ys == std::vector<Shape>{{4}, {4}, {2}});
  CHECK(loader.batch(2).y.to_vector() == V{4.0, 4.5});
}
