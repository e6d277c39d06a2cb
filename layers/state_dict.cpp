#include <tapegrad/layers/state_dict.h>

#include <stdexcept>

namespace tapegrad::layers {

void StateDict::insert(const std::string& key, const Tensor& value) {
  auto [it, added] = index_.try_emplace(key, entries_.size());
  if (!added) {
    entries_[it->second].second = value;
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
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

bool StateDict::erase(const std::string& key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return false;
  const std::size_t pos = it->second;
  index_.erase(it);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(pos));
  for (auto& [k, i] : index_)
    if (i > pos) --i;
  return true;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> k;
  k.reserve(entries_.size());
  for (auto& e : entries_) k.push_back(e.first);
  return k;
}

StateDict state_dict_under(const Archive& archive, const std::string& prefix) {
  StateDict d;
  for (auto& [k, t] : archive.with_prefix(prefix)) d.insert(k, t);
  return d;
}

}  // namespace tapegrad::layers
