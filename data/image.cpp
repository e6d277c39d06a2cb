// The format sniffer, the byte -> float32 (C, H, W) conversion and the file reader; the
// decoders themselves are image_png.cpp and image_jpeg.cpp.
#include <tapegrad/data/image.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tapegrad::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error("read_image: cannot open '" + path + "': " + std::strerror(errno));
  std::vector<std::uint8_t> bytes;
  std::uint8_t buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
    bytes.insert(bytes.end(), buf, buf + n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get()))
    throw std::runtime_error("read_image: cannot read '" + path + "': " + std::strerror(errno));
  return bytes;
}

}  // namespace

ImageFormat sniff_image_format(const std::uint8_t* bytes, std::size_t size, const std::string& source) {
  static const std::uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 8 && std::memcmp(bytes, png_sig, 8) == 0) return ImageFormat::PNG;
  if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return ImageFormat::JPEG;
  throw std::runtime_error("decode_image: '" + source + "': neither a PNG nor a JPEG file (" + std::to_string(size) +
                           " bytes, no PNG signature or JPEG SOI marker at the start)");
}

std::string image_size_refusal(std::int64_t width, std::int64_t height, std::int64_t max_pixels) {
  if (width >= 1 && height >= 1 && width <= max_pixels / height) return "";  // no product: it could overflow
  return "size " + std::to_string(width) + " x " + std::to_string(height) + " (W x H) is outside 1 .. " +
         std::to_string(max_pixels) + " pixels";
}

Image8 decode_image(const std::uint8_t* bytes, std::size_t size, const std::string& source, std::int64_t max_pixels) {
  return sniff_image_format(bytes, size, source) == ImageFormat::PNG ? decode_png(bytes, size, source, max_pixels)
                                                                     : decode_jpeg(bytes, size, source, max_pixels);
}

Tensor image_to_tensor(const Image8& image) {
  const std::int64_t H = image.height, W = image.width, C = image.channels;
  std::int64_t n = 0;
  if (H < 0 || W < 0 || C < 1 || __builtin_mul_overflow(H, W, &n) || __builtin_mul_overflow(n, C, &n) ||
      static_cast<std::uint64_t>(n) != image.pixels.size())
    throw std::invalid_argument("image_to_tensor: " + std::to_string(image.pixels.size()) +
                                " pixel bytes for H x W x C = " + std::to_string(H) + " x " + std::to_string(W) +
                                " x " + std::to_string(C));
  Tensor t = Tensor::empty({C, H, W}, Dtype::Float32);
  float* out = t.data<float>();
  const std::uint8_t* in = image.pixels.data();
  const std::int64_t plane = H * W;
  for (std::int64_t p = 0; p < plane; ++p)
    for (std::int64_t c = 0; c < C; ++c) out[c * plane + p] = static_cast<float>(in[p * C + c]) / 255.0f;
  return t;
}

Image8 read_image8(const std::string& path, std::int64_t max_pixels) {
  const std::vector<std::uint8_t> bytes = read_bytes(path);
  return decode_image(bytes.data(), bytes.size(), path, max_pixels);
}

Tensor read_image(const std::string& path, std::int64_t max_pixels) {
  return image_to_tensor(read_image8(path, max_pixels));
}

}  // namespace tapegrad::data
