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

// The setjmp frame: returns false with err.message set when libjpeg failed, true with the
// image in `img` or a reason in `refused`. `img` is the caller's, so the longjmp skips no
// destructor.
bool read_jpeg_into(jpeg_decompress_struct& cinfo, JpegError& err, jpeg_progress_mgr& progress,
                    const std::uint8_t* bytes, std::size_t size, std::int64_t max_pixels, Image8& img,
                    std::string& refused) {
  if (setjmp(err.jump)) return false;
  jpeg_create_decompress(&cinfo);  // clears every field but err
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  img.width = cinfo.image_width;
  img.height = cinfo.image_height;
  refused = image_size_refusal(img.width, img.height, max_pixels);
  if (!refused.empty()) return true;
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    refused = "CMYK/YCCK JPEG files are not supported (grey and colour only)";
    return true;
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  img.channels = cinfo.output_components;
  if ((img.channels != 1 && img.channels != 3) || cinfo.output_width != img.width || cinfo.output_height != img.height) {
    refused = "unsupported pixel layout (" + std::to_string(img.channels) + " channels)";
    return true;
  }
  const std::size_t stride = static_cast<std::size_t>(img.width) * static_cast<std::size_t>(img.channels);
  img.pixels.resize(stride * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img.pixels.data() + static_cast<std::size_t>(cinfo.output_scanline) * stride;
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
  Image8 img;
  std::string refused;
  const bool ok = read_jpeg_into(cinfo, err, progress, bytes, size, max_pixels, img, refused);
  jpeg_destroy_decompress(&cinfo);
  if (!ok) throw std::runtime_error(at + "corrupt or truncated JPEG file (" + std::string(err.message) + ")");
  if (!refused.empty()) throw std::runtime_error(at + refused);
  return img;
}

}  // namespace tapegrad::data
