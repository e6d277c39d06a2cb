// libFuzzer target for data::decode_image (the PNG and JPEG decoders over a byte buffer).
//
// Contract checked: any input either decodes or throws std::runtime_error (anything else,
// a crash or a sanitizer report is a bug); a decoded image has 1, 3 or 4 channels, a
// positive size within the pixel bound, exactly H · W · C bytes, and converts to a
// (C, H, W) tensor whose values lie in [0, 1].
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include <tapegrad/data/image.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tapegrad::data;
  constexpr std::int64_t kMaxPixels = std::int64_t{1} << 20;  // keeps each run fast; part of the contract
  Image8 img;
  try {
    img = decode_image(data, size, "<fuzz>", kMaxPixels);
  } catch (const std::runtime_error&) {
    return 0;
  }
  const std::int64_t c = img.channels;
  if (c != 1 && c != 3 && c != 4) std::abort();
  if (img.height < 1 || img.width < 1 || img.height * img.width > kMaxPixels) std::abort();
  if (static_cast<std::uint64_t>(img.height * img.width * c) != img.pixels.size()) std::abort();
  if (img.height * img.width <= 4096) {
    const tapegrad::Tensor t = image_to_tensor(img);
    if (t.dim() != 3 || t.size(0) != c || t.size(1) != img.height || t.size(2) != img.width) std::abort();
    const float* p = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (!(p[i] >= 0.0f && p[i] <= 1.0f)) std::abort();
  }
  return 0;
}
