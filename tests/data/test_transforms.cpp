// Image transforms: worked examples of torchvision's CenterCrop / RandomCrop / flip rules,
// Normalize's fitted statistics, the per-sample generator, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include <tapegrad/data/image_folder.h>
#include <tapegrad/data/transforms.h>
#include "test_errors_support.h"

using namespace tapegrad;
using namespace tapegrad::data;
using Catch::Matchers::Contains;

namespace {

Tensor iota_image(std::int64_t C, std::int64_t H, std::int64_t W) {
  std::vector<double> v(static_cast<std::size_t>(C * H * W));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::from_vector(v, {C, H, W}, Dtype::Float32);
}

std::vector<float> values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

}  // namespace

TEST_CASE("sample_generator: one stream per (seed, epoch, index), the same on every call", "[data][image]") {
  Generator a = sample_generator(7, 2, 41), b = sample_generator(7, 2, 41);
  const std::uint64_t first = a.next_u64();
  CHECK(first == b.next_u64());
  CHECK(sample_generator(7, 2, 42).next_u64() != first);
  CHECK(sample_generator(7, 3, 41).next_u64() != first);
  CHECK(sample_generator(8, 2, 41).next_u64() != first);
  CHECK(sample_generator(0, 1, 0).next_u64() != sample_generator(0, 0, 1).next_u64());  // not symmetric
}

TEST_CASE("CenterCrop: torchvision's offsets, round((H - h) / 2) with halves to even", "[data][image]") {
  Generator g(0);
  const Tensor img = iota_image(1, 4, 5);  // rows 0..4, 5..9, 10..14, 15..19
  // top = round(2 / 2) = 1, left = round(3 / 2) = 2
  CHECK(values(CenterCrop({2, 2})(img, g)) == std::vector<float>{7, 8, 12, 13});
  // 4 x 4 -> 1 x 1: round(1.5) = 2; -> 3 x 3: round(0.5) = 0
  const Tensor sq = iota_image(1, 4, 4);
  CHECK(values(CenterCrop({1, 1})(sq, g)) == std::vector<float>{10});
  CHECK(values(CenterCrop({3, 3})(sq, g)) == std::vector<float>{0, 1, 2, 4, 5, 6, 8, 9, 10});
  CHECK(CenterCrop({4, 5})(img, g).shape() == Shape{1, 4, 5});
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { CenterCrop({5, 5})(img, g); }),
             Contains("window (5, 5) (h, w) is larger than the image (1, 4, 5)"));
  CHECK_THAT(test::thrown<std::invalid_argument>([] { CenterCrop({0, 2}); }), Contains("got (0, 2)"));
}

TEST_CASE("RandomCrop: zero padding, top then left drawn from the sample's generator", "[data][image]") {
  const Tensor img = Tensor::from_vector({1, 2, 3, 4}, {1, 2, 2}, Dtype::Float32);
  const RandomCrop crop({2, 2}, 1);  // padded 4 x 4: 3 x 3 window positions
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::uint64_t s = 0; s < 200; ++s) {
    Generator g(s), copy(s);
    const Tensor out = crop(img, g);
    const std::int64_t top = copy.randint(3), left = copy.randint(3);
    seen.insert({top, left});
    // the padded image: zeros around [[1, 2], [3, 4]] at rows / columns 1..2
    std::vector<float> want;
    for (std::int64_t y = top; y < top + 2; ++y)
      for (std::int64_t x = left; x < left + 2; ++x)
        want.push_back((y >= 1 && y <= 2 && x >= 1 && x <= 2) ? static_cast<float>((y - 1) * 2 + (x - 1) + 1) : 0.0f);
    REQUIRE(values(out) == want);
    REQUIRE(g.next_u64() == copy.next_u64());  // exactly two draws
  }
  CHECK(seen.size() == 9);
  Generator g(1), copy(1);
  CHECK(values(RandomCrop({2, 2})(img, g)) == std::vector<float>{1, 2, 3, 4});  // no room: no draw
  CHECK(g.next_u64() == copy.next_u64());
  CHECK_THAT(test::thrown<std::invalid_argument>([&] { RandomCrop({5, 5}, 1)(img, g); }),
             Contains("window (5, 5) (h, w) is larger than the image (1, 2, 2) (C, H, W) padded by 1"));
  CHECK_THAT(test::thrown<std::invalid_argument>([] { RandomCrop({2, 2}, -1); }), Contains("padding must be >= 0, got -1"));
}

TEST_CASE("RandomHorizontalFlip: mirrors W when gen.uniform() < p", "[data][image]") {
  const Tensor img = iota_image(2, 1, 3);  // channel 0: 0 1 2; channel 1: 3 4 5
  Generator g(3);
  CHECK(values(RandomHorizontalFlip(1.0)(img, g)) == std::vector<float>{2, 1, 0, 5, 4, 3});
  CHECK(values(RandomHorizontalFlip(0.0)(img, g)) == std::vector<float>{0, 1, 2, 3, 4, 5});
  int flips = 0;
  for (std::uint64_t s = 0; s < 100; ++s) {
    Generator a(s), b(s);
    const bool want = b.uniform() < 0.5;
    const bool got = RandomHorizontalFlip()(img, a).data<float>()[0] == 2.0f;
    REQUIRE(got == want);
    flips += got;
  }
  CHECK(flips > 20);
  CHECK(flips < 80);
  CHECK_THAT(test::thrown<std::invalid_argument>([] { RandomHorizontalFlip(1.5); }), Contains("[0, 1], got 1.5"));
}

TEST_CASE("Compose: RandomCrop then flip draw from one generator in turn", "[data][image]") {
  const Tensor img = iota_image(1, 4, 4);
  const Compose aug{{RandomCrop({3, 3}, 1), RandomHorizontalFlip()}};
  for (std::int64_t i = 0; i < 20; ++i) {
    Generator g = sample_generator(5, 0, i), h = sample_generator(5, 0, i);
    const Tensor want = RandomHorizontalFlip()(RandomCrop({3, 3}, 1)(img, h), h);
    REQUIRE(values(aug(img, g)) == values(want));
  }
  Generator g(0);
  CHECK(values(Compose{}(img, g)) == values(img));
}

TEST_CASE("Normalize: per-channel population statistics of the training split", "[data][image]") {
  // channel 0 holds 0, 1, 2, 3 (mean 1.5, std sqrt(1.25)); channel 1 is constant 5 (std 0 -> 1)
  const Tensor X = Tensor::from_vector({0, 1, 5, 5, 2, 3, 5, 5}, {2, 2, 1, 2}, Dtype::Float32);
  const Normalize n = Normalize::fit(X);
  CHECK(n.mean() == std::vector<double>{1.5, 5.0});
  CHECK(n.stddev()[0] == std::sqrt(1.25));
  CHECK(n.stddev()[1] == 1.0);
  const Tensor out = n(X);
  const float s = static_cast<float>(std::sqrt(1.25));
  CHECK(out.data<float>()[1] == (1.0f - 1.5f) / s);
  CHECK(out.data<float>()[2] == 0.0f);
  Generator g(0);
  const Tensor one = n(Tensor::from_vector({3, 3, 6, 6}, {2, 1, 2}, Dtype::Float32), g);
  CHECK(one.data<float>()[0] == (3.0f - 1.5f) / s);
  CHECK(one.data<float>()[3] == 1.0f);
  const Normalize back = Normalize::from_state_dict(n.state_dict());
  CHECK(back.mean() == n.mean());
  CHECK(back.stddev() == n.stddev());
}

TEST_CASE("Normalize: refused statistics and inputs name the value", "[data][image][errors]") {
  using test::thrown;
  CHECK_THAT(thrown<std::invalid_argument>([] { Normalize({0.5}, {0.5, 0.5}); }), Contains("1 means and 2 stds"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Normalize({0.5}, {0.0}); }), Contains("channel 0 must be finite and > 0"));
  const Normalize n({0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
  CHECK_THAT(thrown<std::invalid_argument>([&] { n(Tensor::zeros({1, 4, 4})); }),
             Contains("C = 3, got float32 (1, 4, 4)"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Normalize::fit(Tensor::zeros({4, 3})); }),
             Contains("(N, C, H, W), got float32 (4, 3)"));
  CHECK_THAT(thrown<std::invalid_argument>([] { Normalize::from_state_dict({{"mean", Tensor::zeros({3})}}); }),
             Contains("\"mean\" must be float64 (C), got float32 (3)"));
  CHECK_THAT(thrown<std::invalid_argument>([] {
               Normalize::from_state_dict({{"mean", Tensor::zeros({3}, Dtype::Float64)}});
             }),
             Contains("no \"std\" tensor"));
}

TEST_CASE("Normalize::fit: a lazily decoded training split gives the statistics of its loaded X", "[data][image]") {
  // the checked-in Fashion-MNIST slice: 10 classes x 4 grey 28 x 28 PNGs
  auto folder = std::make_shared<ImageFolder>(std::string(TAPEGRAD_TESTS_DIR) + "/fixtures/fmnist_png/train");
  const Subset part(folder, {0, 5, 17, 39});
  const Normalize lazy = Normalize::fit(part);
  const Normalize loaded = Normalize::fit(folder->load(part.indices()).X);
  CHECK(lazy.mean() == loaded.mean());
  CHECK(lazy.stddev() == loaded.stddev());
  CHECK(lazy.mean()[0] > 0.05);
  CHECK(lazy.mean()[0] < 0.8);
}
