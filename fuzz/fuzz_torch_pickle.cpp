// libFuzzer target for the restricted unpickler of torch.save files (io/torch_pickle.h) and
// the tensor rebuilding after it (io/torch_tensors.h), with storages served from memory.
//
// Contract checked: any input either unpickles and builds a state dict or throws
// std::runtime_error (anything else, a crash, a hang, a leak or a sanitizer report is a
// bug); every tensor built lies inside the storage it was read from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <tapegrad/io/torch_pickle.h>
#include <tapegrad/io/torch_tensors.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tapegrad;
  io::TorchPickle p;
  try {
    p = io::unpickle_torch(data, size);
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (p.root >= p.values.size()) std::abort();
  // storages of up to 64 KiB, filled with a pattern; larger ones are refused as a reader would
  io::StorageReader read = [](const io::PickleStorage&, std::size_t nbytes) {
    if (nbytes > (std::size_t{1} << 16)) throw std::runtime_error("storage too large for the fuzzer");
    auto s = std::make_shared<Storage>(nbytes);
    for (std::size_t i = 0; i < nbytes; ++i) static_cast<unsigned char*>(s->data())[i] = static_cast<unsigned char>(i * 7);
    return s;
  };
  for (bool half : {false, true}) {
    io::TorchReadOptions o;
    o.half_to_float32 = half;
    std::uint64_t budget = std::uint64_t{1} << 20;
    try {
      const layers::StateDict d = io::torch_state_dict(p, read, o, budget);
      for (const auto& [k, t] : d) {
        if (t.numel() == 0) continue;
        const auto& impl = *t.impl();
        if (impl.offset + t.nbytes() > impl.storage->nbytes()) std::abort();
        volatile unsigned char sink = static_cast<const unsigned char*>(t.raw_data())[t.nbytes() - 1];
        (void)sink;
      }
    } catch (const std::runtime_error&) {
    }
  }
  return 0;
}
