// Decode speed of data::decode_image on files already in memory, and the decoded pixels for a
// comparison with another decoder (bench/compare_image_decode.sh runs it beside PIL).
//
//   image_decode --time REPEATS FILE...   per file: best-of-5 mean microseconds per decode,
//                                          bytes -> Image8 and bytes -> float32 (C, H, W)
//   image_decode --dump FILE OUT           writes the decoded bytes (H, W, C) to OUT
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/data/image.h>

using namespace tapegrad;

namespace {

std::vector<std::uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "image_decode: cannot open '%s'\n", path.c_str());
    std::exit(1);
  }
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <class F>
double best_mean_us(int repeats, F&& f) {
  double best = 1e300;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / repeats);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--dump") {
    data::Image8 img;
    try {
      img = data::read_image8(argv[2]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "image_decode: %s\n", e.what());
      return 1;
    }
    std::ofstream out(argv[3], std::ios::binary);
    out.write(reinterpret_cast<const char*>(img.pixels.data()), static_cast<std::streamsize>(img.pixels.size()));
    std::printf("%lld %lld %lld\n", static_cast<long long>(img.height), static_cast<long long>(img.width),
                static_cast<long long>(img.channels));
    return out ? 0 : 1;
  }
  if (argc < 4 || std::string(argv[1]) != "--time") {
    std::fprintf(stderr, "usage: image_decode --time REPEATS FILE... | image_decode --dump FILE OUT\n");
    return 2;
  }
  const int repeats = std::atoi(argv[2]);
  if (repeats < 1) {
    std::fprintf(stderr, "image_decode: REPEATS must be >= 1, got %s\n", argv[2]);
    return 2;
  }
  std::printf("file,decode_us,decode_to_tensor_us\n");
  for (int a = 3; a < argc; ++a) {
    const std::vector<std::uint8_t> b = bytes_of(argv[a]);
    volatile std::size_t sink = 0;
    const double d = best_mean_us(repeats, [&] { sink = data::decode_image(b.data(), b.size(), argv[a]).pixels.size(); });
    const double t = best_mean_us(repeats, [&] {
      sink = static_cast<std::size_t>(data::image_to_tensor(data::decode_image(b.data(), b.size(), argv[a])).numel());
    });
    std::printf("%s,%.2f,%.2f\n", argv[a], d, t);
  }
  return 0;
}
