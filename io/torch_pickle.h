#pragma once
// A restricted unpickler for the data.pkl of PyTorch's torch.save archives.
//
// It understands exactly what a state dict needs and never executes anything: the
// opcodes of pickle protocols 2-4 that build None, bool, int, float, str, tuple, list and
// dict values, the memo (BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET), MARK-based
// building (MARK, TUPLE, APPENDS, SETITEMS, ...), persistent ids (BINPERSID) for storages,
// and GLOBAL / STACK_GLOBAL for these names only:
//   collections.OrderedDict                   (called with no arguments, BUILD with a dict)
//   torch._utils._rebuild_tensor_v2           (storage, offset, size, stride, requires_grad, hooks[, metadata])
//   torch._utils._rebuild_parameter           (tensor, requires_grad, hooks)
//   torch.<Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool>Storage
// Any other opcode or global is refused with a std::runtime_error naming it and its byte
// offset. The result is a tree of values in an arena (indices, no pointers), so a hostile
// pickle that makes a list contain itself cannot leak or recurse.
//
// Cost: every opcode costs O(1) amortised time, plus O(its argument bytes) or O(the items
// it pops), so time is linear in the pickle's size. Nothing is copied when a pickle reuses
// an object (GET of a memoized string, tuple or dict, DUP): ids are shared; equal strings
// share one id (PickleValue::i), so a dict key or storage key is hashed once, not at every
// use; None, True, False, () and the ints 0-255 are one value each. Working memory (values,
// container items, the stack, the memo, the dict and string indices, storages, tensors) is
// charged to a budget of kTorchPickleMemoryPerByte bytes per pickle byte + 1 MiB, so a
// pickle whose objects outgrow its bytes (one GET'd 64-dimension size tuple rebuilding a
// million tensors) is refused before it allocates more. Lengths read from the pickle are
// checked against the bytes that remain before anything is allocated.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::io {

/// A storage named by a persistent id ('storage', torch.XStorage, key, location, numel).
struct PickleStorage {
  std::string type;      ///< "FloatStorage", "HalfStorage", ...
  std::string key;       ///< the record name under `<archive>/data/`
  std::string location;  ///< "cpu", "cuda:0", ... (everything loads to the CPU)
  /// Elements in the storage (from the persistent id).
  std::int64_t numel = 0;
};

/// A tensor made by torch._utils._rebuild_tensor_v2: a view of a storage.
struct PickleTensor {
  std::size_t storage = 0;  ///< index into TorchPickle::storages
  std::int64_t offset = 0;  ///< storage offset, in elements
  /// The tensor's shape.
  std::vector<std::int64_t> size;
  std::vector<std::int64_t> stride;  ///< in elements
  /// The flag saved with the tensor (a parameter's is true).
  bool requires_grad = false;
};

/// One value of the unpickled tree.
struct PickleValue {
  /// What the value is (which of the fields below holds it).
  enum class Kind : std::uint8_t { None, Bool, Int, Float, String, Tuple, List, Dict, Global, Storage, Tensor };
  /// What the value is.
  Kind kind = Kind::None;
  bool ordered = false;     ///< Dict: an OrderedDict
  union {
    /// Bool, Int: the value; String: an id equal strings share; Global: the callable (see
    /// torch_pickle.cpp); Storage, Tensor: index into TorchPickle::storages / tensors.
    std::int64_t i = 0;
    double f;  ///< Float
  };
  /// String: its text (a view into TorchPickle::text); Global: the name ("OrderedDict").
  std::string_view s;
  std::vector<std::size_t> items;  ///< Tuple, List: item ids; Dict: key0, value0, key1, value1, ...
};

/// "None", "bool", "int", "float", "str", "tuple", "list", "dict", "global", "storage", "tensor".
const char* pickle_kind_name(PickleValue::Kind k);
/// The name of pickle opcode `op` ("BINGET", "REDUCE", ...), nullptr for a byte that is none.
const char* pickle_opcode_name(std::uint8_t op);

/// The unpickled tree: values[root] is the object the pickle returned.
struct TorchPickle {
  /// Every value of the tree; ids index this arena.
  std::vector<PickleValue> values;
  std::vector<PickleStorage> storages;  ///< one per distinct key (shared storages appear once)
  /// Every tensor rebuilt, in order (PickleValue::i of a Tensor value indexes it).
  std::vector<PickleTensor> tensors;
  /// Id of the object the pickle returned.
  std::size_t root = 0;
  /// Bytes of working memory charged while unpickling (see kTorchPickleMemoryPerByte).
  std::size_t memory_used = 0;
  /// A copy of the pickle's bytes, which the strings view (shared by copies of the tree).
  std::shared_ptr<const std::string> text;
  /// The value with id `id` (unchecked: id < values.size()).
  const PickleValue& value(std::size_t id) const { return values[id]; }
};

/// Largest data.pkl accepted (16 MiB): a state dict needs about 120 bytes per tensor, so
/// this holds well over 100 000 tensors.
constexpr std::size_t kTorchMaxPickleBytes = std::size_t{16} << 20;
/// The unpickler's working memory budget, in bytes per pickle byte (plus 1 MiB). The pickles
/// torch.save writes need about 20 (about 9 values of 56 bytes per tensor of ~55 pickle
/// bytes, plus items, memo and indices; tests/io/test_torch_dos.cpp measures the fixtures).
/// A hostile pickle stops at the budget; its peak resident memory is then about 1.3 x the
/// budget (a vector's old block lives while it grows).
constexpr std::size_t kTorchPickleMemoryPerByte = 64;

/// Unpickles `size` bytes. Pure function of the bytes (a fuzzing entry point). Throws
/// std::runtime_error naming the problem and its byte offset: an opcode or global outside
/// the list above, a truncated argument, a stack underflow or missing MARK, a memo index
/// never stored, a dict key that is not a str or int, wrong arguments to a rebuild function
/// (negative sizes or strides, size/stride rank mismatch, more than 64 dimensions), a
/// persistent id that is not a storage tuple, a storage key or location longer than 64
/// bytes, one storage key with two types or sizes, a memo index at or past the pickle's size
/// (Python numbers the memo from 0, one index per store), working memory beyond the budget
/// (kTorchPickleMemoryPerByte), bytes after STOP, or a pickle larger than
/// kTorchMaxPickleBytes. A global of torch.nn or __main__ (a pickled nn.Module) is refused
/// with the advice to save its state_dict() instead.
TorchPickle unpickle_torch(const std::uint8_t* data, std::size_t size);

}  // namespace tapegrad::io
