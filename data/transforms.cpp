// The image transforms of transforms.h and the per-sample generator.
#include <tapegrad/data/transforms.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <tapegrad/data/describe.h>
#include <tapegrad/data/image_folder.h>

namespace tapegrad::data {
namespace {

void check_window(const char* who, const Shape& size) {
  if (size.size() != 2 || size[0] < 1 || size[1] < 1)
    throw std::invalid_argument(std::string(who) + ": size must be (h, w) with h, w >= 1, got " + tuple_str(size));
}

// The (h, w) window of image (C, H, W) whose top-left corner is (top, left) in the image
// padded by `pad` zeros on every side.
Tensor window(const Tensor& image, std::int64_t top, std::int64_t left, std::int64_t h, std::int64_t w,
              std::int64_t pad) {
  const std::int64_t C = image.size(0), H = image.size(1), W = image.size(2);
  Tensor out = Tensor::zeros({C, h, w}, Dtype::Float32);
  const float* src = image.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t y = 0; y < h; ++y) {
      const std::int64_t sy = top + y - pad;
      if (sy < 0 || sy >= H) continue;
      for (std::int64_t x = 0; x < w; ++x) {
        const std::int64_t sx = left + x - pad;
        if (sx >= 0 && sx < W) dst[(c * h + y) * w + x] = src[(c * H + sy) * W + sx];
      }
    }
  return out;
}

// Python's round(k / 2) for an integer k >= 0 (halves to even).
std::int64_t half_round_even(std::int64_t k) {
  const std::int64_t q = k / 2;
  return (k % 2 == 1 && q % 2 == 1) ? q + 1 : q;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

Generator sample_generator(std::uint64_t seed, std::int64_t epoch, std::int64_t index) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<std::uint64_t>(epoch));
  h = splitmix64(h ^ static_cast<std::uint64_t>(index));
  return Generator(h);
}

Tensor Compose::operator()(const Tensor& image, Generator& gen) const {
  Tensor t = image;
  for (const Transform& f : transforms) t = f(t, gen);
  return t;
}

Resize::Resize(Shape s) : size(std::move(s)) { check_window("Resize", size); }

Tensor Resize::operator()(const Tensor& image, Generator&) const { return resize(image, size); }

CenterCrop::CenterCrop(Shape s) : size(std::move(s)) { check_window("CenterCrop", size); }

Tensor CenterCrop::operator()(const Tensor& image, Generator&) const {
  check_float_image("CenterCrop", image);
  const std::int64_t H = image.size(1), W = image.size(2);
  if (H < size[0] || W < size[1])
    throw std::invalid_argument("CenterCrop: window " + tuple_str(size) + " (h, w) is larger than the image " +
                                tuple_str(image.shape()) + " (C, H, W)");
  return window(image, half_round_even(H - size[0]), half_round_even(W - size[1]), size[0], size[1], 0);
}

RandomCrop::RandomCrop(Shape s, std::int64_t pad) : size(std::move(s)), padding(pad) {
  check_window("RandomCrop", size);
  if (padding < 0) throw std::invalid_argument("RandomCrop: padding must be >= 0, got " + std::to_string(padding));
}

Tensor RandomCrop::operator()(const Tensor& image, Generator& gen) const {
  check_float_image("RandomCrop", image);
  const std::int64_t H = image.size(1) + 2 * padding, W = image.size(2) + 2 * padding;
  if (H < size[0] || W < size[1])
    throw std::invalid_argument("RandomCrop: window " + tuple_str(size) + " (h, w) is larger than the image " +
                                tuple_str(image.shape()) + " (C, H, W) padded by " + std::to_string(padding));
  std::int64_t top = 0, left = 0;
  if (H != size[0] || W != size[1]) {
    top = gen.randint(H - size[0] + 1);
    left = gen.randint(W - size[1] + 1);
  }
  return window(image, top, left, size[0], size[1], padding);
}

RandomHorizontalFlip::RandomHorizontalFlip(double prob) : p(prob) {
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument("RandomHorizontalFlip: p must be in [0, 1], got " + std::to_string(p));
}

Tensor RandomHorizontalFlip::operator()(const Tensor& image, Generator& gen) const {
  check_float_image("RandomHorizontalFlip", image);
  const bool flip = gen.uniform() < p;
  const std::int64_t rows = image.size(0) * image.size(1), W = image.size(2);
  Tensor out = Tensor::empty(image.shape(), Dtype::Float32);
  const float* src = image.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t x = 0; x < W; ++x) dst[r * W + x] = src[r * W + (flip ? W - 1 - x : x)];
  return out;
}

}  // namespace tapegrad::data
