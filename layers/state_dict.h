#pragma once
// StateDict: an ordered name -> tensor map, PyTorch's state_dict.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>

namespace tapegrad::layers {

/// Ordered (insertion order) mapping from dotted names ("0.weight",
/// "1.running_mean") to tensors. Keys are unique; insert, find and contains take O(1)
/// on average (a hash index beside the ordered entries), erase O(size).
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;
  /// Adds or replaces `key`.
  void insert(const std::string& key, const Tensor& value);
  bool contains(const std::string& key) const;
  /// The tensor under key; throws std::out_of_range naming the key.
  const Tensor& at(const std::string& key) const;
  /// Pointer to the tensor under key, or nullptr.
  const Tensor* find(const std::string& key) const;
  bool erase(const std::string& key);
  std::vector<std::string> keys() const;
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // key -> position in entries_
};

}  // namespace tapegrad::layers
