// decode_jpeg: libjpeg-turbo's libjpeg API over a memory buffer (jpeg_mem_src). libjpeg
// reports errors through error_exit, which longjmps back into read_jpeg_into (a frame holding
// no object with a destructor); warnings (corrupt or truncated data) are errors here too.
#include <tapegrad/data/image.h>

#include <csetjmp>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

// jpeglib.h needs size_t and FILE declared first
#include <jpeglib.h>

namespace tapegrad::data {
namespace {

constexpr int kMaxScans = 1000;  // progressive files with more scans are refused (decode time)

struct JpegError {
  jpeg_error_mgr mgr;  // first member: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// msg_level -1 is a warning: corrupt data that libjpeg would paper over (grey blocks for a
// truncated file). Refused, as PIL refuses truncated files.
void jpeg_emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) jpeg_error_exit(cinfo);
}

void jpeg_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->is_decompressor && d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<JpegError*>(cinfo->err);
    std::snprintf(err->message, sizeof err->message, "more than %d progressive scans", kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

struct Header {
  JDIMENSION width = 0, height = 0;
  int channels = 0;
};

bool read_jpeg_into(jpeg_decompress_struct& cinfo, JpegError& err, jpeg_progress_mgr& progress,
                    const std::uint8_t* bytes, std::size_t size, std::int64_t max_pixels, Header& h,
                    std::vector<std::uint8_t>& pixels, std::string& refused) {
  if (setjmp(err.jump)) return false;
  jpeg_create_decompress(&cinfo);  // clears every field but err
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  h.width = cinfo.image_width;
  h.height = cinfo.image_height;
  if (h.width == 0 || h.height == 0 ||
      static_cast<std::int64_t>(h.width) * static_cast<std::int64_t>(h.height) > max_pixels) {
    refused = "size " + std::to_string(h.width) + " x " + std::to_string(h.height) + " (W x H) is outside 1 .. " +
              std::to_string(max_pixels) + " pixels";
    return true;
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    refused = "CMYK/YCCK JPEG files are not supported (grey and colour only)";
    return true;
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  h.channels = cinfo.output_components;
  if ((h.channels != 1 && h.channels != 3) || cinfo.output_width != h.width || cinfo.output_height != h.height) {
    refused = "unsupported pixel layout (" + std::to_string(h.channels) + " channels)";
    return true;
  }
  const std::size_t stride = static_cast<std::size_t>(h.width) * static_cast<std::size_t>(h.channels);
  pixels.resize(stride * h.height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels.data() + static_cast<std::size_t>(cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

}  // namespace

Image8 decode_jpeg(const std::uint8_t* bytes, std::size_t size, const std::string& source, std::int64_t max_pixels) {
  const std::string at = "decode_jpeg: '" + source + "': ";
  if (size < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF)
    throw std::runtime_error(at + "not a JPEG file (no SOI marker FF D8 FF)");
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_emit_message;
  jpeg_progress_mgr progress{};
  progress.progress_monitor = jpeg_progress;
  Header h;
  std::vector<std::uint8_t> pixels;
  std::string refused;
  const bool ok = read_jpeg_into(cinfo, err, progress, bytes, size, max_pixels, h, pixels, refused);
  jpeg_destroy_decompress(&cinfo);
  if (!ok) throw std::runtime_error(at + "corrupt or truncated JPEG file (" + std::string(err.message) + ")");
  if (!refused.empty()) throw std::runtime_error(at + refused);
  Image8 img;
  img.height = h.height;
  img.width = h.width;
  img.channels = h.channels;
  img.pixels = std::move(pixels);
  return img;
}

}  // namespace tapegrad::data
