#include "layers/state_dict.h"

#include <stdexcept>

namespace tapegrad::layers {

void StateDict::insert(const std::string& key, const Tensor& value) {
  for (auto& e : entries_)
    if (e.first == key) {
      e.second = value;
      return;
    }
  entries_.emplace_back(key, value);
}

bool StateDict::contains(const std::string& key) const { return find(key) != nullptr; }

const Tensor& StateDict::at(const std::string& key) const {
  if (const Tensor* t = find(key)) return *t;
  throw std::out_of_range("state_dict has no key '" + key + "'");
}

const Tensor* StateDict::find(const std::string& key) const {
  for (auto& e : entries_)
    if (e.first == key) return &e.second;
  return nullptr;
}

bool StateDict::erase(const std::string& key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->first == key) {
      entries_.erase(it);
      return true;
    }
  return false;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> k;
  k.reserve(entries_.size());
  for (auto& e : entries_) k.push_back(e.first);
  return k;
}

}  // namespace tapegrad::layers
