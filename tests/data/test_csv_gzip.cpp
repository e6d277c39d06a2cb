// read_csv on gzip files that are cut short, damaged, followed by other bytes, made of
// several members, or inflate past CsvOptions::max_decompressed_bytes (a gzip bomb).
#include <catch2/catch.hpp>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <tapegrad/data/csv.h>

#include "temp_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
namespace fs = std::filesystem;

namespace {

struct GzDir : tapegrad::test::TempDir {
  GzDir() : TempDir("tapegrad_gz") {}
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

// One gzip member holding `text` (deflate level 9, gzip wrapper: header, data, CRC32, ISIZE).
std::string gzip(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// 40 rows "i,i*7,label"; the last value is the 5-digit 19463 so a cut can shorten it.
std::string table() {
  std::string s = "a,b,y\n";
  for (int i = 0; i < 39; ++i) s += std::to_string(i) + "," + std::to_string(i * 7) + "," + std::to_string(i % 3) + "\n";
  s += "39,273,19463\n";
  return s;
}

}  // namespace

TEST_CASE("read_csv: a gzip file cut before its end is an error naming the file", "[data][csv][errors]") {
  GzDir dir;
  const std::string z = gzip(table());
  const CsvOptions reg{.label = "y", .task = CsvTask::Regression};
  // intact: 40 rows, the last target 19463
  const Dataset d = read_csv(dir.write("ok.csv.gz", z), reg);
  REQUIRE(d.size() == 40);
  CHECK(d.y.to_vector().back() == 19463.0);
  // cut 12 bytes before the end (inside the deflate data), 8 (the whole trailer), 4 (ISIZE)
  for (std::size_t cut : {std::size_t{12}, std::size_t{8}, std::size_t{4}, std::size_t{1}}) {
    INFO("cut " << cut << " bytes");
    const std::string p = dir.write("cut.csv.gz", z.substr(0, z.size() - cut));
    CHECK_THROWS_AS(read_csv(p, reg), std::runtime_error);
    CHECK_THROWS_WITH(read_csv(p, reg), Catch::Contains("cut.csv.gz") && Catch::Contains("cut short"));
  }
  // the header and a few bytes only
  const std::string head = dir.write("head.csv.gz", z.substr(0, 12));
  CHECK_THROWS_WITH(read_csv(head, reg), Catch::Contains("head.csv.gz") && Catch::Contains("cut short"));
}

TEST_CASE("read_csv: a damaged gzip file (CRC32 or length) or bytes after it are errors", "[data][csv][errors]") {
  GzDir dir;
  const std::string z = gzip(table());
  const CsvOptions reg{.label = "y", .task = CsvTask::Regression};
  std::string crc = z;
  crc[crc.size() - 8] = static_cast<char>(crc[crc.size() - 8] ^ 0x01);  // first CRC32 byte
  CHECK_THROWS_WITH(read_csv(dir.write("crc.csv.gz", crc), reg),
                    Catch::Contains("crc.csv.gz") && Catch::Contains("corrupt gzip data") &&
                        Catch::Contains("incorrect data check"));
  std::string len = z;
  len[len.size() - 4] = static_cast<char>(len[len.size() - 4] ^ 0x01);  // ISIZE
  CHECK_THROWS_WITH(read_csv(dir.write("len.csv.gz", len), reg),
                    Catch::Contains("len.csv.gz") && Catch::Contains("incorrect length check"));
  CHECK_THROWS_WITH(read_csv(dir.write("tail.csv.gz", z + "garbage"), reg),
                    Catch::Contains("tail.csv.gz") && Catch::Contains("7 bytes after the end of the gzip stream"));
  // zero padding after the stream is ignored, as gzip does
  CHECK(read_csv(dir.write("pad.csv.gz", z + std::string(16, '\0')), reg).size() == 40);
}

TEST_CASE("read_csv: every member of a multi-member gzip file is read", "[data][csv]") {
  GzDir dir;
  const std::string a = "a,b,y\n1,2,0\n3,4,1\n", b = "5,6,0\n", c = "7,8,1\n";
  const Dataset d = read_csv(dir.write("multi.csv.gz", gzip(a) + gzip(b) + gzip(c)));
  REQUIRE(d.size() == 4);
  CHECK(d.X.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(d.y.to_vector() == std::vector<double>{0, 1, 0, 1});
  // a cut second member is cut short too
  const std::string second = gzip(b);
  CHECK_THROWS_WITH(read_csv(dir.write("multi_cut.csv.gz", gzip(a) + second.substr(0, second.size() - 3))),
                    Catch::Contains("cut short"));
}

TEST_CASE("read_csv: a gzip file inflating past max_decompressed_bytes is refused naming the limit", "[data][csv][errors]") {
  GzDir dir;
  CHECK(CsvOptions{}.max_decompressed_bytes == std::uint64_t{1} << 30);  // 1 GiB by default
  std::string big = "a,b\n";
  while (big.size() < (std::size_t{4} << 20)) big += "0,0\n";  // 4 MiB of rows, ~4 KiB compressed
  const std::string p = dir.write("bomb.csv.gz", gzip(big));
  CHECK(fs::file_size(p) < 65536);
  CsvOptions o;
  o.max_decompressed_bytes = std::uint64_t{1} << 20;
  CHECK_THROWS_AS(read_csv(p, o), std::runtime_error);
  CHECK_THROWS_WITH(read_csv(p, o), Catch::Contains("bomb.csv.gz") && Catch::Contains("more than 1048576 bytes") &&
                                        Catch::Contains("CsvOptions::max_decompressed_bytes"));
  o.max_decompressed_bytes = big.size();  // exactly the inflated size: read
  CHECK(read_csv(p, o).size() == static_cast<std::int64_t>((big.size() - 4) / 4));
  o.max_decompressed_bytes = big.size() - 1;
  CHECK_THROWS_WITH(read_csv(p, o), Catch::Contains("max_decompressed_bytes"));
  // a plain-text file is not limited
  o.max_decompressed_bytes = 16;
  CHECK(read_csv(dir.write("plain.csv", "a,b\n1,0\n2,1\n"), o).size() == 2);
}
