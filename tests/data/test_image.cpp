// PNG / JPEG decoding against the pixels PIL decodes from the same files
// (tests/fixtures/images, written by make_image_fixtures.py), a worked example value by
// value, and the errors for broken files.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/data/image.h>
#include <zlib.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
using Catch::Matchers::Contains;

namespace {

const std::string kDir = std::string(TAPEGRAD_TESTS_DIR) + "/fixtures/images/";

std::vector<std::uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The largest |ours - PIL's| over every byte; requires the same H, W, C first.
int max_diff_to_pil(const std::string& name, std::int64_t H, std::int64_t W, std::int64_t C) {
  const Image8 img = read_image8(kDir + name);
  REQUIRE(img.height == H);
  REQUIRE(img.width == W);
  REQUIRE(img.channels == C);
  const std::vector<std::uint8_t> want = bytes_of(kDir + name + ".pixels");
  REQUIRE(img.pixels.size() == want.size());
  int worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(int(img.pixels[i]) - int(want[i])));
  return worst;
}

}  // namespace

TEST_CASE("read_image: a grey PNG as float32 (1, H, W), each byte v as v / 255", "[data][image]") {
  const Tensor t = read_image(kDir + "grey_3x2.png");
  REQUIRE(t.dtype() == Dtype::Float32);
  REQUIRE(t.shape() == Shape{1, 2, 3});
  const float* p = t.data<float>();
  const float want[6] = {0.0f, 51.0f / 255.0f, 1.0f, 128.0f / 255.0f, 1.0f / 255.0f, 254.0f / 255.0f};
  for (int i = 0; i < 6; ++i) CHECK(p[i] == want[i]);
  CHECK(p[1] == 0.2f);  // 51 / 255 rounds to the float nearest 0.2
}

TEST_CASE("read_image: RGBA planes are channel-first (C, H, W)", "[data][image]") {
  // pixels (255,0,0,255) (0,255,0,128) / (0,0,255,0) (10,20,30,40)
  const Tensor t = read_image(kDir + "rgba_2x2.png");
  REQUIRE(t.shape() == Shape{4, 2, 2});
  const float* p = t.data<float>();
  const int want[16] = {255, 0, 0, 10, 0, 255, 0, 20, 0, 0, 255, 30, 255, 128, 0, 40};
  for (int i = 0; i < 16; ++i) CHECK(p[i] == static_cast<float>(want[i]) / 255.0f);
}

TEST_CASE("decode_png: the same pixels as PIL for every colour type", "[data][image]") {
  CHECK(max_diff_to_pil("grey_3x2.png", 2, 3, 1) == 0);
  CHECK(max_diff_to_pil("rgb_4x3.png", 3, 4, 3) == 0);
  CHECK(max_diff_to_pil("rgba_2x2.png", 2, 2, 4) == 0);
  CHECK(max_diff_to_pil("la_2x1.png", 1, 2, 4) == 0);            // grey + alpha -> RGBA
  CHECK(max_diff_to_pil("palette_3x1.png", 1, 3, 3) == 0);       // palette -> RGB
  CHECK(max_diff_to_pil("palette_trns_3x1.png", 1, 3, 4) == 0);  // palette + tRNS -> RGBA
  CHECK(max_diff_to_pil("bilevel_5x2.png", 2, 5, 1) == 0);       // 1-bit grey -> 0 / 255
  CHECK(max_diff_to_pil("rgb_9x10_adam7.png", 10, 9, 3) == 0);   // Adam7 interlaced
  CHECK(max_diff_to_pil("rgb16_3x2.png", 2, 3, 3) == 0);         // 16-bit: the high byte
  CHECK(max_diff_to_pil("photo_24x16.png", 16, 24, 3) == 0);
}

TEST_CASE("decode_jpeg: baseline, progressive and grey JPEG within 1 of PIL", "[data][image]") {
  CHECK(max_diff_to_pil("photo_24x16.jpg", 16, 24, 3) <= 1);
  CHECK(max_diff_to_pil("photo_24x16_progressive.jpg", 16, 24, 3) <= 1);
  CHECK(max_diff_to_pil("grey_24x16.jpg", 16, 24, 1) <= 1);
}

TEST_CASE("decode_image: the format comes from the content, not the name", "[data][image]") {
  const std::vector<std::uint8_t> png = bytes_of(kDir + "rgb_4x3.png");
  const std::vector<std::uint8_t> jpg = bytes_of(kDir + "photo_24x16.jpg");
  CHECK(sniff_image_format(png.data(), png.size()) == ImageFormat::PNG);
  CHECK(sniff_image_format(jpg.data(), jpg.size()) == ImageFormat::JPEG);
  CHECK(decode_image(jpg.data(), jpg.size(), "x.png").width == 24);
}

TEST_CASE("read_image: broken files are refused naming the file and the reason", "[data][image][errors]") {
  using test::thrown;
  const auto err = [](const std::string& name) {
    return thrown<std::runtime_error>([&] { read_image(kDir + name); });
  };
  CHECK_THAT(err("truncated.png"), Contains(kDir + "truncated.png") && Contains("truncated PNG file"));
  CHECK_THAT(err("bad_crc.png"), Contains(kDir + "bad_crc.png") && Contains("corrupt PNG file") && Contains("CRC"));
  CHECK_THAT(err("corrupt_idat.png"), Contains(kDir + "corrupt_idat.png") && Contains("corrupt PNG file") &&
                                          Contains("IDAT"));
  CHECK_THAT(err("truncated.jpg"), Contains(kDir + "truncated.jpg") && Contains("corrupt or truncated JPEG") &&
                                       Contains("Premature end of JPEG file"));
  CHECK_THAT(err("not_an_image.png"), Contains(kDir + "not_an_image.png") && Contains("neither a PNG nor a JPEG"));
  CHECK_THAT(err("empty.jpg"), Contains(kDir + "empty.jpg") && Contains("0 bytes"));
  CHECK_THAT(err("no_such_file.png"), Contains("cannot open '" + kDir + "no_such_file.png'") &&
                                          Contains("No such file"));
  CHECK_THAT(err(""), Contains("cannot read '" + kDir + "'") && Contains("Is a directory"));
}

TEST_CASE("decode_image: an image above max_pixels is refused before decoding", "[data][image][errors]") {
  using test::thrown;
  const std::vector<std::uint8_t> png = bytes_of(kDir + "photo_24x16.png");
  const std::vector<std::uint8_t> jpg = bytes_of(kDir + "photo_24x16.jpg");
  CHECK_THAT(thrown<std::runtime_error>([&] { decode_png(png.data(), png.size(), "p.png", 383); }),
             Contains("'p.png'") && Contains("size 24 x 16 (W x H) is outside 1 .. 383 pixels"));
  CHECK_THAT(thrown<std::runtime_error>([&] { decode_jpeg(jpg.data(), jpg.size(), "p.jpg", 383); }),
             Contains("'p.jpg'") && Contains("size 24 x 16 (W x H) is outside 1 .. 383 pixels"));
  CHECK(decode_png(png.data(), png.size(), "p.png", 384).width == 24);
  CHECK_THAT(thrown<std::runtime_error>([&] { decode_jpeg(png.data(), png.size(), "p.png"); }),
             Contains("not a JPEG file"));
  CHECK_THAT(thrown<std::runtime_error>([&] { decode_png(jpg.data(), jpg.size(), "p.jpg"); }),
             Contains("not a PNG file"));
}

namespace {

// A PNG file written here: IHDR (W, H, bit depth, colour type), one IDAT chunk holding `rows`
// compressed at zlib's level 9, IEND; CRCs by zlib.
std::vector<std::uint8_t> png_file(std::uint32_t width, std::uint32_t height, std::uint8_t depth, std::uint8_t color,
                                   const std::vector<std::uint8_t>& rows) {
  std::vector<std::uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const auto be32 = [](std::vector<std::uint8_t>& v, std::uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<std::uint8_t>(x >> s));
  };
  const auto chunk = [&](const char* type, const std::vector<std::uint8_t>& data) {
    be32(out, static_cast<std::uint32_t>(data.size()));
    std::vector<std::uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    out.insert(out.end(), body.begin(), body.end());
    be32(out, static_cast<std::uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
  };
  std::vector<std::uint8_t> ihdr;
  be32(ihdr, width);
  be32(ihdr, height);
  ihdr.insert(ihdr.end(), {depth, color, 0, 0, 0});
  chunk("IHDR", ihdr);
  uLongf n = compressBound(static_cast<uLong>(rows.size()));
  std::vector<std::uint8_t> z(n);
  REQUIRE(compress2(z.data(), &n, rows.data(), static_cast<uLong>(rows.size()), 9) == Z_OK);
  z.resize(n);
  chunk("IDAT", z);
  chunk("IEND", {});
  return out;
}

}  // namespace

TEST_CASE("decode_png: the rows a file claims cannot outgrow what deflate makes of its bytes",
          "[data][image][errors]") {
  using test::thrown;
  // 2^26 16-bit RGBA pixels (within max_pixels: 536,870,912 bytes of rows) from a 68-byte
  // file: refused from the header, before any buffer (was: 800 MB, then "Not enough image data")
  const std::vector<std::uint8_t> tiny = png_file(1u << 26, 1, 16, 6, std::vector<std::uint8_t>(10, 0));
  CHECK_THAT(thrown<std::runtime_error>([&] { decode_png(tiny.data(), tiny.size(), "t.png"); }),
             Contains("'t.png'") && Contains("size 67108864 x 1 needs 536870912 x 1 bytes of rows") &&
                 Contains("that deflate can make of a " + std::to_string(tiny.size()) + "-byte file"));
  // The bound holds for the most compressible image there is: 2048 x 2048 zeros at level 9
  // (4,196,352 bytes of rows in about 4 KB) decodes.
  const std::vector<std::uint8_t> zeros = png_file(2048, 2048, 8, 0, std::vector<std::uint8_t>(2048 * 2049, 0));
  INFO(zeros.size() << " bytes");
  const Image8 img = decode_png(zeros.data(), zeros.size(), "zeros.png");
  CHECK(img.width == 2048);
  CHECK(img.height == 2048);
  CHECK(img.pixels.size() == 2048u * 2048u);
  CHECK(img.pixels[2048u * 2048u - 1] == 0);
}

TEST_CASE("image_to_tensor: a pixel buffer of the wrong size is refused naming both", "[data][image][errors]") {
  Image8 img;
  img.height = 2;
  img.width = 2;
  img.channels = 3;
  img.pixels.assign(11, 0);
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { image_to_tensor(img); }),
             Contains("11 pixel bytes") && Contains("2 x 2 x 3"));
}

TEST_CASE("image_size_refusal: a size whose pixel count passes int64 is refused, not wrapped", "[data][image]") {
  const std::int64_t big = std::int64_t{1} << 32;
  CHECK(data::image_size_refusal(big, big, data::kMaxImagePixels) ==
        "size 4294967296 x 4294967296 (W x H) is outside 1 .. 67108864 pixels");
  CHECK_FALSE(data::image_size_refusal(std::numeric_limits<std::int64_t>::max(), 2, data::kMaxImagePixels).empty());
  CHECK_FALSE(data::image_size_refusal(0, 5, data::kMaxImagePixels).empty());
  CHECK_FALSE(data::image_size_refusal(-1, -1, data::kMaxImagePixels).empty());
  CHECK(data::image_size_refusal(8192, 8192, data::kMaxImagePixels).empty());  // exactly the bound
  CHECK_FALSE(data::image_size_refusal(8193, 8192, data::kMaxImagePixels).empty());
}
