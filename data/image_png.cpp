// decode_png: libpng's progressive-free "classic" reader over a memory buffer. libpng reports
// errors by longjmp; the jump lands in read_png_into, which holds no object whose destructor
// would be skipped (the output buffers belong to the caller), and turns it into an exception.
#include <tapegrad/data/image.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <png.h>

namespace tapegrad::data {
namespace {

constexpr std::size_t kDeflateMaxRatio = 1032;  // deflate's largest expansion (RFC 1951)

struct PngSource {
  const std::uint8_t* bytes = nullptr;
  std::size_t size = 0;
  std::size_t pos = 0;
  bool truncated = false;
  char message[256] = {};
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}

void png_warning_fn(png_structp, png_const_charp) {}  // ancillary problems: libpng goes on

void png_read_fn(png_structp png, png_bytep out, png_size_t length) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (length > src->size - src->pos) {
    src->truncated = true;
    png_error(png, "truncated");
  }
  std::memcpy(out, src->bytes + src->pos, length);
  src->pos += length;
}

// The setjmp frame: returns false with src.message set when libpng failed, true with the
// image in `img` or a reason in `refused`. `img` and `rows` are the caller's, so the longjmp
// skips no destructor.
bool read_png_into(png_structp png, png_infop info, PngSource& src, std::int64_t max_pixels, Image8& img,
                   std::vector<png_bytep>& rows, std::string& refused) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, &src, png_read_fn);
  // libpng's own bounds: the image size, and one ancillary chunk at 8 MiB.
  png_set_user_limits(png, 0x7fffffffU, 0x7fffffffU);
  png_set_chunk_malloc_max(png, 8u << 20);
  png_read_info(png, info);
  img.width = png_get_image_width(png, info);
  img.height = png_get_image_height(png, info);
  refused = image_size_refusal(img.width, img.height, max_pixels);
  if (!refused.empty()) return true;
  // The cost must not outgrow the input: the pixels come out of deflate, which expands at
  // most 1032 times (a 258-byte match in 2 bits), so a file of S bytes holds at most
  // 1032 (S + 1) bytes of rows. A 100-byte file claiming 2^26 16-bit RGBA pixels took 800 MB
  // before libpng found the data missing.
  const std::size_t file_rowbytes = png_get_rowbytes(png, info);  // as stored, before any transform
  const std::size_t most = kDeflateMaxRatio * (src.size + 1);
  if (file_rowbytes > most / static_cast<std::size_t>(img.height)) {
    refused = "size " + std::to_string(img.width) + " x " + std::to_string(img.height) + " needs " +
              std::to_string(file_rowbytes) + " x " + std::to_string(img.height) +
              " bytes of rows, more than the " + std::to_string(most) + " that deflate can make of a " +
              std::to_string(src.size) + "-byte file: truncated or corrupt";
    return true;
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  }
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  if (depth == 16) png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  img.channels = png_get_channels(png, info);
  const png_size_t rowbytes = png_get_rowbytes(png, info);
  if ((img.channels != 1 && img.channels != 3 && img.channels != 4) ||
      rowbytes != static_cast<png_size_t>(img.width) * static_cast<png_size_t>(img.channels)) {
    refused = "unsupported pixel layout (" + std::to_string(img.channels) + " channels, " + std::to_string(rowbytes) +
              " bytes per row)";
    return true;
  }
  const std::size_t height = static_cast<std::size_t>(img.height);
  img.pixels.resize(static_cast<std::size_t>(rowbytes) * height);
  rows.resize(height);
  for (std::size_t y = 0; y < height; ++y) rows[y] = img.pixels.data() + y * rowbytes;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);  // the chunks after the pixels, through IEND (CRCs checked)
  return true;
}

}  // namespace

Image8 decode_png(const std::uint8_t* bytes, std::size_t size, const std::string& source, std::int64_t max_pixels) {
  const std::string at = "decode_png: '" + source + "': ";
  if (size < 8 || png_sig_cmp(bytes, 0, 8) != 0) throw std::runtime_error(at + "not a PNG file (bad signature)");
  PngSource src;
  src.bytes = bytes;
  src.size = size;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_error_fn, png_warning_fn);
  if (!png) throw std::runtime_error(at + "libpng could not start (out of memory)");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw std::runtime_error(at + "libpng could not start (out of memory)");
  }
  Image8 img;
  std::vector<png_bytep> rows;
  std::string refused;
  const bool ok = read_png_into(png, info, src, max_pixels, img, rows, refused);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) {
    if (src.truncated)
      throw std::runtime_error(at + "truncated PNG file (the data ends at byte " + std::to_string(size) +
                               " before the IEND chunk)");
    throw std::runtime_error(at + "corrupt PNG file (" + std::string(src.message) + ")");
  }
  if (!refused.empty()) throw std::runtime_error(at + refused);
  return img;
}

}  // namespace tapegrad::data
