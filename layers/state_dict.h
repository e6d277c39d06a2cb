#pragma once
// StateDict: an ordered name -> tensor map, PyTorch's state_dict.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tapegrad/core/archive.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers {

/// Ordered (insertion order) mapping from dotted names ("0.weight",
/// "1.running_mean") to tensors. Keys are unique; insert, find and contains take O(1)
/// on average (a hash index beside the ordered entries), erase O(size).
class StateDict {
 public:
  /// One (key, tensor) pair, as iteration yields it.
  using Entry = std::pair<std::string, Tensor>;
  /// Adds or replaces `key`.
  void insert(const std::string& key, const Tensor& value);
  /// Whether `key` is present.
  bool contains(const std::string& key) const;
  /// The tensor under key; throws std::out_of_range naming the key.
  const Tensor& at(const std::string& key) const;
  /// Pointer to the tensor under key, or nullptr.
  const Tensor* find(const std::string& key) const;
  /// Removes `key`, keeping the order of the rest; false when it was absent.
  bool erase(const std::string& key);
  /// Every key, in insertion order.
  std::vector<std::string> keys() const;
  /// Number of entries.
  std::size_t size() const { return entries_.size(); }
  /// true when there are no entries.
  bool empty() const { return entries_.empty(); }
  /// Iteration over the Entry pairs in insertion order (read-only).
  auto begin() const { return entries_.begin(); }
  /// End of the iteration.
  auto end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // key -> position in entries_
};

/// The tensors of `archive` under `prefix`, prefix removed, in order (Archive::with_prefix:
/// an empty prefix leaves the extras out).
StateDict state_dict_under(const Archive& archive, const std::string& prefix);

}  // namespace tapegrad::layers
