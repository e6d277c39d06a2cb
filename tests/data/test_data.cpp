// Data: IDX reader (good, truncated, bad magic, gzip and plain fixtures), Dataset,
// DataLoader, train/validation split, standardisation, and the installed Fashion-MNIST.
#include <catch2/catch.hpp>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <tapegrad/data/dataloader.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/data/fashion_mnist.h>
#include <tapegrad/data/idx.h>

#include "fashion_mnist_support.h"
#include "temp_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::data;

namespace {

namespace fs = std::filesystem;

using tapegrad::test::TempDir;

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gz_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// 3 images of 2×2 uint8: values 0..11.
IdxArray small_images() {
  IdxArray a;
  a.type = IdxType::UInt8;
  a.dims = {3, 2, 2};
  for (int i = 0; i < 12; ++i) a.payload.push_back(static_cast<std::uint8_t>(i * 20));
  return a;
}

// n rows: X (n, 1) float32 with X[i] = i and labels y[i] = i, so a batch shows which rows it holds.
Dataset counting_dataset(std::int64_t n) {
  std::vector<double> xs;
  std::vector<std::int64_t> ys;
  for (std::int64_t i = 0; i < n; ++i) {
    xs.push_back(static_cast<double>(i));
    ys.push_back(i);
  }
  return Dataset::make(Tensor::from_vector(xs, {n, 1}, Dtype::Float32), Tensor::from_int64(ys, {n}));
}
}  // namespace

TEST_CASE("IDX: encode/parse round trip and big-endian decoding", "[data]") {
  const IdxArray a = small_images();
  const auto bytes = encode_idx(a);
  // Magic 0x00000803 (uint8, 3 dims), dims 3, 2, 2 big-endian, then 12 bytes.
  REQUIRE(bytes.size() == 4 + 12 + 12);
  REQUIRE(bytes[0] == 0x00);
  REQUIRE(bytes[1] == 0x00);
  REQUIRE(bytes[2] == 0x08);
  REQUIRE(bytes[3] == 0x03);
  REQUIRE(bytes[7] == 3);
  const IdxArray b = parse_idx(bytes.data(), bytes.size());
  REQUIRE(b.type == IdxType::UInt8);
  REQUIRE(b.dims == std::vector<std::int64_t>{3, 2, 2});
  REQUIRE(b.payload == a.payload);
  Tensor t = b.to_float32(1.0 / 255.0);
  REQUIRE(t.shape() == Shape{3, 2, 2});
  REQUIRE(t.at(11) == Approx(220.0 / 255.0));

  // int32 and int16, big-endian, negative values: 0xFFFFFFFE = -2, 0x0102 = 258.
  const std::vector<std::uint8_t> i32 = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 1, 0};
  const IdxArray c = parse_idx(i32.data(), i32.size());
  REQUIRE(c.to_int64().to_vector() == std::vector<double>{-2, 256});
  const std::vector<std::uint8_t> i16 = {0, 0, 0x0B, 1, 0, 0, 0, 1, 0x01, 0x02};
  REQUIRE(parse_idx(i16.data(), i16.size()).value(0) == 258);
  // float32 1.5 is 0x3FC00000.
  const std::vector<std::uint8_t> f32 = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0};
  const IdxArray f = parse_idx(f32.data(), f32.size());
  REQUIRE(f.to_float32().item() == 1.5);
  REQUIRE_THROWS_WITH(f.to_int64(), Catch::Contains("float32"));
}

TEST_CASE("IDX: parse errors name the source and the byte offset and the expected size", "[data]") {
  const auto good = encode_idx(small_images());
  SECTION("empty buffer") {
    REQUIRE_THROWS_WITH(parse_idx(good.data(), 0, "x.idx"),
                        Catch::Contains("x.idx") && Catch::Contains("byte offset 0"));
  }
  SECTION("truncated header") {
    REQUIRE_THROWS_WITH(parse_idx(good.data(), 10, "x.idx"),
                        Catch::Contains("truncated header") && Catch::Contains("16 header bytes") &&
                            Catch::Contains("byte offset 10"));
  }
  SECTION("truncated payload") {
    REQUIRE_THROWS_AS(parse_idx(good.data(), good.size() - 1, "x.idx"), std::runtime_error);
    REQUIRE_THROWS_WITH(parse_idx(good.data(), good.size() - 5, "x.idx"),
                        Catch::Contains("truncated data") && Catch::Contains("expected a total of 28 bytes") &&
                            Catch::Contains("got 23") && Catch::Contains("byte offset 23"));
  }
  SECTION("trailing data") {
    auto longer = good;
    longer.push_back(7);
    REQUIRE_THROWS_WITH(parse_idx(longer.data(), longer.size(), "x.idx"),
                        Catch::Contains("trailing data") && Catch::Contains("byte offset 28"));
  }
  SECTION("bad magic: nonzero leading bytes, unknown type, zero dims") {
    auto bad = good;
    bad[0] = 0x1F;  // e.g. a gzip file handed to the pure parser
    REQUIRE_THROWS_WITH(parse_idx(bad.data(), bad.size(), "x.idx"),
                        Catch::Contains("bad magic number 0x1F000803") && Catch::Contains("byte offset 0"));
    bad = good;
    bad[2] = 0x07;
    REQUIRE_THROWS_WITH(parse_idx(bad.data(), bad.size()), Catch::Contains("bad magic number 0x00000703"));
    bad = good;
    bad[3] = 0;
    REQUIRE_THROWS_WITH(parse_idx(bad.data(), bad.size()), Catch::Contains("bad magic number 0x00000800"));
  }
  SECTION("a huge declared size is refused before any allocation") {
    // 0xFFFFFFFF × 0xFFFFFFFF × 0xFFFFFFFF uint8: would overflow 64 bits.
    const std::vector<std::uint8_t> huge = {0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3};
    REQUIRE_THROWS_WITH(parse_idx(huge.data(), huge.size(), "h.idx"),
                        Catch::Contains("exceeds the limit") && Catch::Contains("h.idx"));
    // Within 64 bits but over a caller's bound.
    REQUIRE_THROWS_WITH(parse_idx(good.data(), good.size(), "x.idx", 11), Catch::Contains("limit of 11 bytes"));
    REQUIRE_NOTHROW(parse_idx(good.data(), good.size(), "x.idx", 12));
  }
}

TEST_CASE("IDX files: gzip and plain read the same and truncated or bad files throw", "[data]") {
  TempDir dir;
  const IdxArray a = small_images();
  write_idx(dir.file("a.idx.gz"), a, true);
  write_idx(dir.file("a.idx"), a, false);
  // The gzip file really is compressed (gzip magic 1F 8B).
  {
    std::ifstream f(dir.file("a.idx.gz"), std::ios::binary);
    REQUIRE(f.get() == 0x1F);
    REQUIRE(f.get() == 0x8B);
  }
  const IdxArray g = read_idx(dir.file("a.idx.gz"));
  const IdxArray p = read_idx(dir.file("a.idx"));
  REQUIRE(g.dims == a.dims);
  REQUIRE(g.payload == a.payload);
  REQUIRE(p.payload == a.payload);

  SECTION("missing file") {
    REQUIRE_THROWS_WITH(read_idx(dir.file("nope.gz")), Catch::Contains("nope.gz") && Catch::Contains("cannot open"));
  }
  SECTION("truncated plain file names the file and the offset") {
    auto bytes = encode_idx(a);
    bytes.resize(20);
    write_bytes(dir.file("t.idx"), bytes);
    REQUIRE_THROWS_WITH(read_idx(dir.file("t.idx")), Catch::Contains("t.idx") && Catch::Contains("truncated data") &&
                                                         Catch::Contains("byte offset 20"));
  }
  SECTION("truncated gzip file") {
    std::ifstream f(dir.file("a.idx.gz"), std::ios::binary);
    std::vector<std::uint8_t> gz((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    gz.resize(gz.size() - 12);  // cut into the deflate data and the trailer
    write_bytes(dir.file("t.idx.gz"), gz);
    REQUIRE_THROWS_WITH(read_idx(dir.file("t.idx.gz")),
                        Catch::Contains("t.idx.gz") && Catch::Contains("byte offset"));
  }
  SECTION("bad magic in a gzip file") {
    IdxArray bad = a;
    auto bytes = encode_idx(bad);
    bytes[1] = 0x42;
    write_gz_bytes(dir.file("m.idx.gz"), bytes);
    REQUIRE_THROWS_WITH(read_idx(dir.file("m.idx.gz")),
                        Catch::Contains("m.idx.gz") && Catch::Contains("bad magic number 0x00420803"));
  }
  SECTION("trailing bytes") {
    auto bytes = encode_idx(a);
    bytes.push_back(1);
    bytes.push_back(2);
    write_bytes(dir.file("x.idx"), bytes);
    REQUIRE_THROWS_WITH(read_idx(dir.file("x.idx")), Catch::Contains("trailing data") && Catch::Contains("byte offset 28"));
  }
  SECTION("bytes after the end of a gzip stream name the file (read_csv's reader refuses them too)") {
    std::ifstream f(dir.file("a.idx.gz"), std::ios::binary);
    std::vector<std::uint8_t> gz((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::size_t end = gz.size();
    for (char c : std::string("garbage!")) gz.push_back(static_cast<std::uint8_t>(c));
    write_bytes(dir.file("g.idx.gz"), gz);
    REQUIRE_THROWS_WITH(read_idx(dir.file("g.idx.gz")),
                        Catch::Contains("g.idx.gz") && Catch::Contains("8 bytes after the end of the gzip stream") &&
                            Catch::Contains("at byte " + std::to_string(end)));
    // zero padding after the stream is ignored, as gzip does
    gz.resize(end + 16, 0);
    std::fill(gz.begin() + static_cast<std::ptrdiff_t>(end), gz.end(), 0);
    write_bytes(dir.file("z.idx.gz"), gz);
    REQUIRE(read_idx(dir.file("z.idx.gz")).payload == a.payload);
  }
  SECTION("a file declaring 4 GB but holding 16 bytes fails without allocating 4 GB") {
    const std::vector<std::uint8_t> liar = {0, 0, 8, 1, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8};
    write_bytes(dir.file("liar.idx"), liar);
    REQUIRE_THROWS_WITH(read_idx(dir.file("liar.idx")), Catch::Contains("exceeds the limit"));
    // Under a larger bound it is a plain truncation at offset 16.
    REQUIRE_THROWS_WITH(read_idx(dir.file("liar.idx"), std::uint64_t{1} << 33), Catch::Contains("byte offset 16"));
  }
}

TEST_CASE("Dataset: validation and take and slice", "[data]") {
  Tensor X = Tensor::from_vector({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, Dtype::Float32);
  Tensor y = Tensor::from_int64({0, 1, 2, 1}, {4});
  Dataset d = Dataset::make(X, y);
  REQUIRE(d.size() == 4);
  REQUIRE(d.num_features() == 2);
  REQUIRE(d.num_classes() == 3);
  Dataset t = d.take({3, 0});
  REQUIRE(t.X.to_vector() == std::vector<double>{30, 31, 0, 1});
  REQUIRE(t.y.to_vector() == std::vector<double>{1, 0});
  REQUIRE(d.slice(1, 3).X.to_vector() == std::vector<double>{10, 11, 20, 21});
  REQUIRE_THROWS_WITH(d.take({4}), Catch::Contains("index 4") && Catch::Contains("N = 4"));
  REQUIRE_THROWS_AS(d.slice(2, 5), std::out_of_range);
  REQUIRE_THROWS_WITH(Dataset::make(X, Tensor::from_int64({0, 1, 2}, {3})),
                      Catch::Contains("[4, 2]") && Catch::Contains("[3]"));
  REQUIRE_THROWS_WITH(Dataset::make(X.to(Dtype::Float64), y), Catch::Contains("float64"));
  // float32 targets are regression targets now (tests/data/test_dataset_shapes.cpp); float64 ones are refused
  REQUIRE_THROWS_WITH(Dataset::make(X, y.to(Dtype::Float64)), Catch::Contains("int64"));
}

TEST_CASE("DataLoader: batch counts and drop_last and a seeded shuffle per epoch", "[data]") {
  const std::int64_t n = 10;
  Dataset d = counting_dataset(n);

  Generator g0(0);
  DataLoader plain(d, {4, false, false}, g0);
  REQUIRE(plain.num_batches() == 3);
  std::vector<std::int64_t> sizes;
  std::vector<double> seen;
  for (const Batch& b : plain) {
    sizes.push_back(b.size());
    for (double v : b.y.to_vector()) seen.push_back(v);
  }
  REQUIRE(sizes == std::vector<std::int64_t>{4, 4, 2});
  REQUIRE(seen == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  DataLoader dropped(d, {4, false, true}, g0);
  REQUIRE(dropped.num_batches() == 2);
  std::int64_t count = 0;
  for (const Batch& b : dropped) {
    REQUIRE(b.size() == 4);
    ++count;
  }
  REQUIRE(count == 2);

  // Shuffle: each epoch is a permutation; X and y stay paired; two epochs differ; the
  // same seed gives the same orders; restoring the generator state replays an epoch.
  Generator g1(42), g2(42);
  DataLoader a(d, {3, true, false}, g1), b(d, {3, true, false}, g2);
  auto epoch = [](DataLoader& l) {
    std::vector<double> out;
    for (const Batch& bt : l) {
      auto x = bt.X.to_vector(), y = bt.y.to_vector();
      for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == y[i]);
      out.insert(out.end(), y.begin(), y.end());
    }
    return out;
  };
  const auto e1 = epoch(a);
  const std::string state = g1.get_state();
  const auto e2 = epoch(a);
  REQUIRE(std::set<double>(e1.begin(), e1.end()).size() == static_cast<std::size_t>(n));
  REQUIRE(e1 != e2);
  REQUIRE(epoch(b) == e1);
  REQUIRE(epoch(b) == e2);
  g1.set_state(state);
  REQUIRE(epoch(a) == e2);
  REQUIRE_THROWS_WITH(DataLoader(d, {0, false, false}), Catch::Contains("batch_size >= 1"));
  REQUIRE_THROWS_AS(plain.batch(3), std::out_of_range);
}

TEST_CASE("DataLoader: a row range of a batch is that batch's rows, for a rank's share", "[data]") {
  Dataset d = counting_dataset(10);
  Generator g(7);
  DataLoader l(d, {4, true, false}, g);
  l.reset();
  for (std::int64_t i = 0; i < l.num_batches(); ++i) {
    const Batch whole = l.batch(i);
    std::vector<double> joined;
    for (std::int64_t r = 0; r < whole.size(); r += 2) {  // ranks of 2 rows (the last batch has 2)
      const Batch part = l.batch(i, r, 2);
      REQUIRE(part.size() == 2);
      REQUIRE(part.X.to_vector() == part.y.to_vector());  // X and y stay paired
      for (double v : part.y.to_vector()) joined.push_back(v);
    }
    REQUIRE(joined == whole.y.to_vector());
  }
  REQUIRE(l.batch(2, 0, 0).size() == 0);
  REQUIRE_THROWS_WITH(l.batch(2, 1, 2), Catch::Contains("rows [1, 3) outside batch 2 of 2 rows"));
  REQUIRE_THROWS_WITH(l.batch(0, -1, 2), Catch::Contains("rows [-1, 1)"));
  // a row count whose sum with row_begin would overflow
  REQUIRE_THROWS_WITH(l.batch(0, 1, INT64_MAX), Catch::Contains("rows [1, 1 + 9223372036854775807) outside batch 0"));
  REQUIRE_THROWS_AS(l.batch(3, 0, 1), std::out_of_range);
}

TEST_CASE("train_val_split holds out disjoint rows and standardisation uses training statistics", "[data]") {
  const std::int64_t n = 20;
  Dataset d = counting_dataset(n);
  Generator g(7);
  TrainValSplit s = train_val_split(d, 5, g);
  REQUIRE(s.train.size() == 15);
  REQUIRE(s.val.size() == 5);
  std::set<double> all;
  for (double v : s.train.y.to_vector()) all.insert(v);
  for (double v : s.val.y.to_vector()) all.insert(v);
  REQUIRE(all.size() == 20);
  REQUIRE_THROWS_WITH(train_val_split(d, 21, g), Catch::Contains("val_size <= 20"));

  // numpy: X = [[1, 2], [3, 4], [5, 6]]; X.mean() = 3.5, X.std() = 1.707825127659933;
  // X.mean(0) = [3, 4], X.std(0) = [1.632993161855452, 1.632993161855452].
  Tensor X = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, Dtype::Float32);
  Standardizer glob = Standardizer::fit(X, Standardizer::Scope::Global);
  REQUIRE(glob.mean()[0] == Approx(3.5));
  REQUIRE(glob.stddev()[0] == Approx(1.707825127659933));
  Tensor Z = glob.transform(X);
  REQUIRE(Z.at(0) == Approx((1 - 3.5) / 1.707825127659933));
  REQUIRE(Z.at(5) == Approx((6 - 3.5) / 1.707825127659933));
  Standardizer per = Standardizer::fit(X);
  REQUIRE(per.mean() == std::vector<double>{3, 4});
  REQUIRE(per.stddev()[1] == Approx(1.632993161855452));
  // Applied to other data, the fitted (training) statistics are used, not the new data's.
  Tensor Xv = Tensor::from_vector({7, 8}, {1, 2}, Dtype::Float32);
  REQUIRE(per.transform(Xv).to_vector()[0] == Approx((7 - 3) / 1.632993161855452));
  // A constant column keeps std 1 (maps to 0), never NaN.
  Tensor C = Tensor::from_vector({1, 5, 2, 5, 3, 5}, {3, 2}, Dtype::Float32);
  Tensor Cz = Standardizer::fit(C).transform(C);
  REQUIRE(Cz.at(1) == 0.0);
  REQUIRE(Cz.at(0) == Approx(-1.224744871391589));
  REQUIRE_THROWS_WITH(per.transform(Tensor::zeros({2, 3})), Catch::Contains("(N, 2)") && Catch::Contains("[2, 3]"));
}

TEST_CASE("Fashion-MNIST: the installed files load with the published counts and labels", "[data]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  // numpy over the gzip files: t10k labels[:10] = [9 2 1 1 6 1 4 6 5 7], image 0 pixel
  // sum 33456, bincount 1000 per class; all test pixels / 255: mean 0.2868492807122849
  // (float64; the float32 pixels here agree to ~1e-7).
  Dataset test = load_fashion_mnist(kFashionMnistDir, false);
  REQUIRE(test.size() == 10000);
  REQUIRE(test.num_features() == 784);
  const auto y = test.y.to_vector();
  REQUIRE(std::vector<double>(y.begin(), y.begin() + 10) == std::vector<double>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  std::vector<int> counts(10, 0);
  for (double v : y) counts[static_cast<std::size_t>(v)]++;
  REQUIRE(counts == std::vector<int>(10, 1000));
  double s0 = 0;
  for (std::int64_t j = 0; j < 784; ++j) s0 += test.X.at(j);
  REQUIRE(s0 * 255.0 == Approx(33456).epsilon(1e-6));
  REQUIRE(Standardizer::fit(test.X, Standardizer::Scope::Global).mean()[0] == Approx(0.2868492807122849).epsilon(1e-6));

  Dataset sub = load_fashion_mnist(kFashionMnistDir, true, 100);
  REQUIRE(sub.size() == 100);
  REQUIRE(sub.y.at(0) == 9);  // train labels[:4] = [9 0 0 3]
  REQUIRE(sub.y.at(3) == 3);

  TempDir empty;
  REQUIRE_THROWS_WITH(load_fashion_mnist(empty.path.string(), true),
                      Catch::Contains("dataset-fashion-mnist") && Catch::Contains("train-images-idx3-ubyte.gz"));
}
