#pragma once
// From an unpickled torch.save object (io/torch_pickle.h) to a StateDict of tensors: picks the
// dict of tensors, reads each storage once through a callback, and rebuilds every tensor view
// (storage offset, sizes, strides) with its checks.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/storage.h>
#include <tapegrad/io/torch_pickle.h>
#include <tapegrad/layers/state_dict.h>

namespace tapegrad::io {

/// How a torch.save file's tensors become tapegrad tensors.
struct TorchReadOptions {
  /// float16 and bfloat16 tensors are converted to float32 (tapegrad computes in float32 and
  /// float64 only). false: such a tensor is refused, naming it and this option.
  bool half_to_float32 = false;
  /// When the file holds a dict of things (a training checkpoint {"epoch": 3,
  /// "state_dict": {...}}), the key of the state dict inside it; "" takes the top-level dict.
  std::string entry;
  /// Bytes the reader may allocate for decompressed records, for tensors it has to copy (a
  /// strided view, a converted dtype) and for each state dict entry (its key, shape and
  /// tensor handle, about 200 bytes). 0: torch_default_max_bytes(the archive's size). An
  /// uncompressed archive as torch.save writes it needs at most 1 x (2 x with
  /// half_to_float32, more with many strided views of one storage). convert_torch_to_safetensors
  /// also bounds its output by it: tensors aliasing one storage are written once each.
  std::uint64_t max_bytes = 0;
};

/// TorchReadOptions::max_bytes's default for a file of `file_bytes`: 4 x its size + 1 MiB
/// (saturating at 2^64 - 1).
std::uint64_t torch_default_max_bytes(std::uint64_t file_bytes);

/// Element type of a storage class name: "FloatStorage" -> ("float32", 4) etc.
struct TorchElement {
  const char* name;  ///< PyTorch's dtype name: "float32", "float16", "bfloat16", "int32", ...
  std::size_t size;  ///< bytes per element
};
/// Throws std::runtime_error for a name that is not a torch.*Storage class.
TorchElement torch_element(const std::string& storage_type);

/// Reads storage `s` as `nbytes` little-endian bytes (= s.numel x element size; the callback
/// checks the record holds exactly that many).
using StorageReader = std::function<std::shared_ptr<Storage>(const PickleStorage& s, std::size_t nbytes)>;

/// The tensors of `pickle` as a StateDict, in the pickle's order. Each storage is read once:
/// tensors that share a storage and are contiguous alias it (shares_storage_with is true,
/// like PyTorch); strided views and converted dtypes are copied. `budget` (bytes, decremented)
/// bounds those copies. Throws std::runtime_error: the object is not a dict (of tensors, or
/// holding `entry`), a key that is not a str, a value that is not a tensor (naming the key,
/// its type and the top-level keys), an unsupported dtype (naming the tensor), a view
/// reaching past its storage, an element count that overflows, or a budget overrun (copies
/// and each entry's own memory are charged to `budget`).
/// `converted`, when given, receives "key: float16 -> float32" for each converted tensor.
layers::StateDict torch_state_dict(const TorchPickle& pickle, const StorageReader& read,
                                   const TorchReadOptions& options, std::uint64_t& budget,
                                   std::vector<std::string>* converted = nullptr);

/// IEEE binary16 and bfloat16 bit patterns to float (exact; NaN and infinity kept).
float half_to_float(std::uint16_t bits);
/// bfloat16 (the high 16 bits of a float32) to float.
float bfloat16_to_float(std::uint16_t bits);

}  // namespace tapegrad::io
