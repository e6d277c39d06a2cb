// ImageFolder: the folder walk and its order, lazy decoding, mixed sizes, channel
// conversion, bilinear resize (a worked example of PyTorch's interpolate) and the class
// names carried in checkpoint metadata.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <tapegrad/data/fashion_mnist.h>
#include <tapegrad/data/image_folder.h>
#include "fashion_mnist_support.h"
#include "test_errors_support.h"
#include "image_dir_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = tapegrad::test::image_fixtures();

using FolderDir = tapegrad::test::ImageDir;

}  // namespace

TEST_CASE("ImageFolder: classes sorted, samples by class then file name, others skipped", "[data][image]") {
  FolderDir d;
  d.put("shirt/b.png", "rgb_4x3.png");
  d.put("shirt/a.PNG", "rgb_4x3.png");
  d.put("bag/z.png", "rgb_4x3.png");
  d.put("bag/notes.txt", "rgb_4x3.png");    // not an image name
  d.put("bag/.hidden.png", "rgb_4x3.png");  // hidden
  d.put(".git/x.png", "rgb_4x3.png");       // hidden folder: no class
  d.put("bag/deeper/y.png", "rgb_4x3.png");  // deeper folders are not walked
  d.put("readme.png", "rgb_4x3.png");       // a file at the root is no class
  const ImageFolder f(d.str());
  REQUIRE(f.classes() == std::vector<std::string>{"bag", "shirt"});
  REQUIRE(f.size() == 3);
  CHECK(f.path(0) == (d.path / "bag" / "z.png").string());
  CHECK(f.path(1) == (d.path / "shirt" / "a.PNG").string());  // 'a' < 'b'
  CHECK(f.path(2) == (d.path / "shirt" / "b.png").string());
  CHECK(f.targets() == std::vector<std::int64_t>{0, 1, 1});
  CHECK(f.sample_shape() == Shape{3, 3, 4});
  const Tensor want = read_image((kFixtures / "rgb_4x3.png").string());
  const Tensor got = f.get(2);
  REQUIRE(got.shape() == want.shape());
  for (std::int64_t i = 0; i < want.numel(); ++i) CHECK(got.data<float>()[i] == want.data<float>()[i]);
  CHECK_THAT(test::thrown<std::out_of_range>([&] { f.get(3); }), Contains("sample 3 outside 0 .. 2"));
}

TEST_CASE("ImageFolder::load: an in-memory Dataset with the class names", "[data][image]") {
  FolderDir d;
  d.put("a/1.png", "grey_3x2.png");
  d.put("b/1.png", "grey_3x2.png");
  d.put("b/2.png", "grey_3x2.png");
  const Dataset ds = ImageFolder(d.str()).load();
  REQUIRE(ds.X.shape() == Shape{3, 1, 2, 3});
  CHECK(ds.y.data<std::int64_t>()[0] == 0);
  CHECK(ds.y.data<std::int64_t>()[2] == 1);
  CHECK(ds.class_names == std::vector<std::string>{"a", "b"});
  CHECK(ds.X.data<float>()[6 + 2] == 1.0f);       // sample 1, pixel (0, 2) = 255
  CHECK(ds.X.data<float>()[12 + 1] == 0.2f);      // sample 2, pixel (0, 1) = 51
  const Dataset two = ImageFolder(d.str()).load({2, 0});
  CHECK(two.y.data<std::int64_t>()[0] == 1);
  CHECK(two.y.data<std::int64_t>()[1] == 0);
}

TEST_CASE("ImageFolder: mixed sizes are refused naming the file unless a size is asked", "[data][image][errors]") {
  FolderDir d;
  d.put("a/1.png", "rgb_4x3.png");
  d.put("a/2.jpg", "photo_24x16.jpg");
  const ImageFolder f(d.str());
  CHECK_THAT(test::thrown<std::runtime_error>([&] { f.get(1); }),
             Contains((d.path / "a" / "2.jpg").string()) && Contains("(3, 16, 24)") && Contains("(3, 3, 4)") &&
                 Contains("ImageFolderOptions::size"));
  const ImageFolder r(d.str(), {.size = {8, 8}});
  CHECK(r.sample_shape() == Shape{3, 8, 8});
  CHECK(r.load().X.shape() == Shape{2, 3, 8, 8});
  // grey and RGB mixed: channels = 3 copies grey into R, G, B
  FolderDir g;
  g.put("a/1.png", "grey_3x2.png");
  g.put("a/2.png", "rgb_4x3.png");
  CHECK_THAT(test::thrown<std::runtime_error>([&] { ImageFolder(g.str(), {.size = {2, 3}}).get(1); }),
             Contains("(3, 2, 3)") && Contains("(1, 2, 3)"));
  const ImageFolder rgb(g.str(), {.size = {2, 3}, .channels = 3});
  const Tensor t = rgb.get(0);
  REQUIRE(t.shape() == Shape{3, 2, 3});
  for (int c = 0; c < 3; ++c) CHECK(t.data<float>()[c * 6 + 1] == 0.2f);
}

TEST_CASE("ImageFolder: channels = 1 is PIL's convert(\"L\")", "[data][image]") {
  FolderDir d;
  d.put("a/1.png", "rgb_4x3.png");
  const Tensor t = ImageFolder(d.str(), {.channels = 1}).get(0);
  REQUIRE(t.shape() == Shape{1, 3, 4});
  std::ifstream f(kFixtures / "rgb_4x3.png.L.pixels", std::ios::binary);
  std::vector<char> want((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  REQUIRE(want.size() == 12);
  for (int i = 0; i < 12; ++i) CHECK(t.data<float>()[i] == static_cast<float>(static_cast<unsigned char>(want[i])) / 255.0f);
}

TEST_CASE("ImageFolder: bad folders and files are refused naming them", "[data][image][errors]") {
  using test::thrown;
  FolderDir d;
  CHECK_THAT(thrown<std::runtime_error>([&] { ImageFolder(d.str()); }),
             Contains(d.str()) && Contains("holds no class subfolder"));
  CHECK_THAT(thrown<std::runtime_error>([&] { ImageFolder((d.path / "missing").string()); }),
             Contains((d.path / "missing").string()) && Contains("is not a folder"));
  d.put("a/1.png", "grey_3x2.png");
  fs::create_directories(d.path / "empty_class");
  CHECK_THAT(thrown<std::runtime_error>([&] { ImageFolder(d.str()); }),
             Contains((d.path / "empty_class").string()) && Contains("holds no .png, .jpg or .jpeg file"));
  fs::remove(d.path / "empty_class");
  d.put("a/2.png", "truncated.png");
  const ImageFolder f(d.str());
  CHECK_THAT(thrown<std::runtime_error>([&] { f.get(1); }),
             Contains((d.path / "a" / "2.png").string()) && Contains("truncated PNG file"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { ImageFolder(d.str(), {.size = {0, 3}}); }),
             Contains("size must be (H, W) with H, W >= 1, got (0, 3)"));
  CHECK_THAT(thrown<std::invalid_argument>([&] { ImageFolder(d.str(), {.channels = 4}); }),
             Contains("channels must be 0 (as in the files), 1 or 3, got 4"));
}

TEST_CASE("resize: PyTorch's bilinear interpolate (align_corners=False), a worked example", "[data][image]") {
  // F.interpolate(torch.tensor([[[[0., 1.], [2., 3.]]]]), size=(4, 4), mode="bilinear")
  const Tensor img = Tensor::from_vector({0, 1, 2, 3}, {1, 2, 2}, Dtype::Float32);
  const Tensor r = resize(img, {4, 4});
  REQUIRE(r.shape() == Shape{1, 4, 4});
  const float want[16] = {0.0f, 0.25f, 0.75f, 1.0f, 0.5f, 0.75f, 1.25f, 1.5f,
                          1.5f, 1.75f, 2.25f, 2.5f, 2.0f, 2.25f, 2.75f, 3.0f};
  for (int i = 0; i < 16; ++i) CHECK(r.data<float>()[i] == want[i]);
  // down by 2: each output is the mean of a 2x2 block (the sample point is the block centre)
  const Tensor big = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {1, 4, 4}, Dtype::Float32);
  const Tensor s = resize(big, {2, 2});
  CHECK(s.data<float>()[0] == 2.5f);
  CHECK(s.data<float>()[3] == 12.5f);
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { resize(img, {4}); }), Contains("got (4)"));
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { resize(Tensor::zeros({2, 2}), {4, 4}); }),
             Contains("expected a float32 image (C, H, W), got float32 (2, 2)"));
}

TEST_CASE("class_names_metadata: the class names round-trip through checkpoint metadata", "[data][image]") {
  const std::vector<std::string> names{"T-shirt top", "Trouser", "Ankle boot"};
  const auto md = class_names_metadata(names);
  CHECK(md.at("class_names") == "T-shirt top\nTrouser\nAnkle boot");
  CHECK(class_names_from_metadata(md) == names);
  CHECK_THAT(test::thrown<std::invalid_argument>([] { class_names_from_metadata({}); }),
             Contains("no \"class_names\" key"));
  CHECK_THAT(test::thrown<std::invalid_argument>([] { class_names_metadata({"a", "b\nc"}); }),
             Contains("class 1") && Contains("newline"));
  CHECK_THAT(test::thrown<std::invalid_argument>([] { class_names_from_metadata({{"class_names", "a\n\nb"}}); }),
             Contains("class 1 has an empty name"));
}

TEST_CASE("fixtures/fmnist_png: the script's PNGs hold the Fashion-MNIST IDX bytes", "[data][image]") {
  TAPEGRAD_REQUIRE_FASHION_MNIST();
  const ImageFolder f((fs::path(TAPEGRAD_TESTS_DIR) / "fixtures" / "fmnist_png" / "test").string());
  REQUIRE(f.size() == 10);
  REQUIRE(f.sample_shape() == Shape{1, 28, 28});
  const Dataset test = load_fashion_mnist(kFashionMnistDir, false);
  const std::vector<std::string> names{"T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle_boot"};
  for (std::int64_t i = 0; i < f.size(); ++i) {
    const std::int64_t idx = std::stoll(fs::path(f.path(i)).stem().string());  // the file is named by its IDX row
    const Tensor x = f.get(i);
    CHECK(f.classes()[static_cast<std::size_t>(f.target(i))] == names[static_cast<std::size_t>(test.y.data<std::int64_t>()[idx])]);
    int mismatches = 0;
    for (std::int64_t p = 0; p < 784; ++p)
      mismatches += std::lround(x.data<float>()[p] * 255.0f) != std::lround(test.X.data<float>()[idx * 784 + p] * 255.0f);
    CHECK(mismatches == 0);
  }
}
