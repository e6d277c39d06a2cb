#pragma once
// The object store of the torch.save unpickler (io/torch_pickle.h): the values of the tree,
// the memo, the dict index and the storages, with every allocation charged to a memory
// budget proportional to the pickle's size. Immutable values are shared (one None, True,
// False, () and int 0-255), equal strings share an id (PickleValue::i, hashed once when
// read), and dict keys are indexed by that id, so reusing an object never copies it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <tapegrad/io/torch_pickle.h>

namespace tapegrad::io {

/// Thrown by PickleArena (the unpickler adds "pickle: " and the byte offset).
struct PickleArenaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The values an unpickler builds, under a budget of kTorchPickleMemoryPerByte bytes per
/// pickle byte + 1 MiB. Every method that allocates charges the bytes first and throws
/// PickleArenaError, allocating nothing, when they do not fit.
class PickleArena {
 public:
  /// A store for the pickle `data` of `size` bytes (the budget's size; memo indices below
  /// it), which it copies (charged).
  PickleArena(const std::uint8_t* data, std::size_t size);
  /// The arena's copy of the pickle's bytes.
  std::string_view text() const { return *out_.text; }

  /// Charges `bytes` of working memory; throws PickleArenaError beyond the budget.
  void charge(std::size_t bytes);
  /// Room for one more element of `v`, its growth (capacity doubling) charged.
  template <class T>
  void reserve_one(std::vector<T>& v) {
    if (v.size() < v.capacity()) return;
    const std::size_t cap = v.capacity() < 2 ? 4 : 2 * v.capacity();
    charge((cap - v.capacity()) * sizeof(T));
    v.reserve(cap);
  }

  /// A new value of kind `k` with PickleValue::i = `i`; its id.
  std::size_t make(PickleValue::Kind k, std::int64_t i = 0);
  /// The shared None value.
  std::size_t none() { return shared(none_, PickleValue::Kind::None, 0); }
  /// The shared True or False value.
  std::size_t boolean(bool b) { return b ? shared(true_, PickleValue::Kind::Bool, 1) : shared(false_, PickleValue::Kind::Bool, 0); }
  /// An int (0-255 shared).
  std::size_t integer(std::int64_t v);
  /// A str viewing `text`; equal strings get the same PickleValue::i. `text` must lie in
  /// the arena's copy of the pickle (text()).
  std::size_t string(std::string_view text);
  /// A tuple of `items` (charged; the empty tuple is shared).
  std::size_t tuple(std::vector<std::size_t> items);
  /// dict[key] = value (a repeated key replaces the value, as in Python). Throws
  /// PickleArenaError when `dict` is not a dict or `key` is not a str, int, bool or None.
  void set_item(std::size_t dict, std::size_t key, std::size_t value, const char* op);
  /// list.append(item); throws PickleArenaError when `list` is not a list.
  void append(std::size_t list, std::size_t item, const char* op);

  /// memo[index] = value; throws PickleArenaError for an index at or past the pickle's size.
  void memo_put(std::uint64_t index, std::size_t value);
  /// memo[index]; throws PickleArenaError for an index never stored.
  std::size_t memo_get(std::uint64_t index) const;
  /// Distinct memo indices stored (MEMOIZE's next index).
  std::size_t memo_stored() const { return memo_stored_; }

  /// The storage keyed by the string id `key_id`, added when new; its index and whether it was added.
  std::pair<std::size_t, bool> storage(std::int64_t key_id, const PickleStorage& s);
  /// Adds a rebuilt tensor (its dims charged); its index in TorchPickle::tensors.
  std::size_t tensor(PickleTensor t);

  /// The value with id `id`.
  PickleValue& operator[](std::size_t id) { return out_.values[id]; }
  /// The storages and tensors so far.
  const TorchPickle& result() const { return out_; }
  /// The finished tree, `root` its object.
  TorchPickle finish(std::size_t root);

 private:
  static constexpr std::size_t kUnset = std::numeric_limits<std::size_t>::max();
  struct DictKey {
    std::size_t dict;
    std::int64_t key;
    char tag;
    bool operator==(const DictKey& o) const { return dict == o.dict && key == o.key && tag == o.tag; }
  };
  struct DictKeyHash {
    std::size_t operator()(const DictKey& k) const;
  };
  std::size_t shared(std::size_t& slot, PickleValue::Kind k, std::int64_t v) {
    if (slot == kUnset) slot = make(k, v);
    return slot;
  }

  std::size_t pickle_bytes_, budget_, used_ = 0;
  std::vector<std::size_t> memo_;  // value id per memo index, kUnset where never stored
  std::size_t memo_stored_ = 0;
  std::size_t none_ = kUnset, true_ = kUnset, false_ = kUnset, empty_tuple_ = kUnset;
  std::array<std::size_t, 256> small_ints_;
  std::unordered_map<std::string_view, std::size_t> strings_;
  std::unordered_map<DictKey, std::size_t, DictKeyHash> dict_index_;  // -> position in the dict's items
  std::unordered_map<std::int64_t, std::size_t> storage_index_;      // key's string id -> storage
  TorchPickle out_;
};

}  // namespace tapegrad::io
