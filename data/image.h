#pragma once
// Image files: PNG (libpng) and JPEG (libjpeg-turbo) decoded into 8-bit pixels, and into
// float32 (C, H, W) tensors in [0, 1] as torchvision's ToTensor gives them.
//
// decode_png / decode_jpeg / decode_image are pure parsers over a byte buffer (what the
// fuzzer calls); read_image reads a file and names it in every error.
//
// Channels kept (no colour conversion beyond what the file format itself defines):
//   PNG   grey -> 1; RGB -> 3; RGBA -> 4; grey + alpha -> 4 (grey copied to R, G, B);
//         palette -> 3, or 4 with a tRNS chunk (PIL's convert("RGBA")); a tRNS chunk of a
//         grey or RGB file is ignored (1 or 3 channels, PIL's modes L and RGB); 16-bit
//         samples keep their high byte (as PIL); 1, 2 and 4-bit grey are scaled to 0..255;
//         interlaced files are deinterlaced. No gamma is applied.
//   JPEG  greyscale -> 1; YCbCr (and RGB) -> 3, libjpeg's default ISLOW DCT and fancy
//         upsampling (PIL's defaults); baseline and progressive. CMYK/YCCK are refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::data {

/// Default bound on the pixels (height · width) of one decoded image: 2^26 (8192 x 8192).
/// Checked from the header, before any pixel buffer is allocated.
constexpr std::int64_t kMaxImagePixels = std::int64_t{1} << 26;

/// Why a W x H image is not decoded: "" when W, H >= 1 and W · H <= max_pixels, else
/// "size W x H (W x H) is outside 1 .. <max_pixels> pixels" (decode_png's and decode_jpeg's
/// message, after the file name).
std::string image_size_refusal(std::int64_t width, std::int64_t height, std::int64_t max_pixels);

/// A decoded 8-bit image, interleaved: pixels[(y · width + x) · channels + c].
struct Image8 {
  /// H, rows.
  std::int64_t height = 0;
  /// W, columns.
  std::int64_t width = 0;
  /// C: 1 (grey), 3 (RGB) or 4 (RGBA).
  std::int64_t channels = 0;
  /// H · W · C bytes, row-major, channels interleaved.
  std::vector<std::uint8_t> pixels;
};

/// The container format, from the file's first bytes.
enum class ImageFormat {
  PNG,   ///< starts with the 8-byte PNG signature 89 50 4E 47 0D 0A 1A 0A
  JPEG,  ///< starts with the SOI marker FF D8 FF
};

/// The format of `bytes` from its signature. Throws std::runtime_error naming `source` when
/// it is neither PNG nor JPEG (or shorter than a signature).
ImageFormat sniff_image_format(const std::uint8_t* bytes, std::size_t size, const std::string& source = "<buffer>");

/// Decodes a whole PNG buffer (channels as described at the top of this header). Throws
/// std::runtime_error naming `source` and libpng's reason for a bad signature, a corrupt
/// chunk (CRC), a truncated file (data ending before IEND), rows of more bytes than deflate
/// can make of the file's (1032 per byte: decoding costs at most that), H · W above `max_pixels`, or
/// a zero size.
Image8 decode_png(const std::uint8_t* bytes, std::size_t size, const std::string& source = "<buffer>",
                  std::int64_t max_pixels = kMaxImagePixels);

/// Decodes a whole JPEG buffer (baseline or progressive; grey -> 1 channel, colour -> 3).
/// Throws std::runtime_error naming `source` and libjpeg's reason for corrupt or truncated
/// data (libjpeg's warnings, such as "Premature end of JPEG file", are errors here, as for
/// PIL), CMYK/YCCK colour, more than 1000 progressive scans, or H · W above `max_pixels`.
Image8 decode_jpeg(const std::uint8_t* bytes, std::size_t size, const std::string& source = "<buffer>",
                   std::int64_t max_pixels = kMaxImagePixels);

/// decode_png or decode_jpeg, chosen by sniff_image_format. Throws as they do.
Image8 decode_image(const std::uint8_t* bytes, std::size_t size, const std::string& source = "<buffer>",
                    std::int64_t max_pixels = kMaxImagePixels);

/// The pixels as float32 (C, H, W), each byte v mapped to v / 255.0f (torchvision's
/// ToTensor: exactly 0 and 1 at the ends).
Tensor image_to_tensor(const Image8& image);

/// Reads the file at `path` whole and decodes it (the format from its content, not its
/// name). Throws std::runtime_error naming `path` when the file cannot be opened or read,
/// and as decode_image otherwise.
Image8 read_image8(const std::string& path, std::int64_t max_pixels = kMaxImagePixels);

/// image_to_tensor(read_image8(path)): float32 (C, H, W) in [0, 1]. Throws as read_image8.
Tensor read_image(const std::string& path, std::int64_t max_pixels = kMaxImagePixels);

}  // namespace tapegrad::data
