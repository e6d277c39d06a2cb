// libFuzzer target for the torch.save archive reader (io/torch_archive.h): libzip over an
// in-memory buffer, name checks, record sizes, the unpickler and tensor rebuilding.
//
// Contract checked: any input either yields a state dict or throws std::runtime_error
// (anything else, a crash, a hang, a leak or a sanitizer report is a bug); the reader
// allocates within its limit (4 x the input + 1 MiB; -rss_limit_mb catches more).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include <tapegrad/io/torch_archive.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tapegrad;
  io::TorchReadOptions o;
  o.half_to_float32 = size % 2 == 0;  // both dtype paths
  try {
    const layers::StateDict d = io::parse_torch_archive(data, size, o);
    for (const auto& [k, t] : d)
      if (t.numel() > 0) (void)t.at(t.numel() - 1);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
