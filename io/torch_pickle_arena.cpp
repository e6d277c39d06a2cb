#include <tapegrad/io/torch_pickle_arena.h>

#include <algorithm>
#include <string>

namespace tapegrad::io {

namespace {
using Kind = PickleValue::Kind;
constexpr std::size_t kNodeBytes = 64;  // charged per hash-table entry (node, bucket, malloc overhead)
}  // namespace

std::size_t PickleArena::DictKeyHash::operator()(const DictKey& k) const {
  std::size_t h = std::hash<std::size_t>()(k.dict);
  h ^= std::hash<std::int64_t>()(k.key) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h ^ static_cast<std::size_t>(k.tag);
}

PickleArena::PickleArena(const std::uint8_t* data, std::size_t size)
    : pickle_bytes_(size),
      budget_(kTorchPickleMemoryPerByte * std::min(size, kTorchMaxPickleBytes) + (std::size_t{1} << 20)) {
  small_ints_.fill(kUnset);
  charge(std::min(size, kTorchMaxPickleBytes));
  out_.text = std::make_shared<const std::string>(reinterpret_cast<const char*>(data), size > kTorchMaxPickleBytes ? 0 : size);
}

void PickleArena::charge(std::size_t bytes) {
  if (bytes > budget_ - used_)
    throw PickleArenaError("the objects built need more than " + std::to_string(budget_) +
                           " bytes of working memory (" + std::to_string(kTorchPickleMemoryPerByte) +
                           " per byte of this " + std::to_string(pickle_bytes_) +
                           "-byte pickle + 1 MiB; kTorchPickleMemoryPerByte): its objects outgrow its bytes");
  used_ += bytes;
}

std::size_t PickleArena::make(Kind k, std::int64_t i) {
  reserve_one(out_.values);
  out_.values.emplace_back();
  out_.values.back().kind = k;
  out_.values.back().i = i;
  return out_.values.size() - 1;
}

std::size_t PickleArena::integer(std::int64_t v) {
  if (v >= 0 && v < 256) return shared(small_ints_[static_cast<std::size_t>(v)], Kind::Int, v);
  return make(Kind::Int, v);
}

std::size_t PickleArena::string(std::string_view text) {
  charge(kNodeBytes);
  const auto it = strings_.try_emplace(text, strings_.size()).first;
  const std::size_t id = make(Kind::String, static_cast<std::int64_t>(it->second));
  out_.values[id].s = text;
  return id;
}

std::size_t PickleArena::tuple(std::vector<std::size_t> items) {
  if (items.empty()) return shared(empty_tuple_, Kind::Tuple, 0);
  charge(items.size() * sizeof(std::size_t));
  const std::size_t id = make(Kind::Tuple);
  out_.values[id].items = std::move(items);
  return id;
}

void PickleArena::set_item(std::size_t dict, std::size_t key, std::size_t value, const char* op) {
  if (out_.values[dict].kind != Kind::Dict)
    throw PickleArenaError(std::string(op) + " on a " + pickle_kind_name(out_.values[dict].kind) + ", not a dict");
  const PickleValue& k = out_.values[key];
  DictKey dk{dict, k.i, 'i'};  // Python: True == 1
  if (k.kind == Kind::String) dk.tag = 's';
  else if (k.kind == Kind::None) dk = {dict, 0, 'n'};
  else if (k.kind != Kind::Int && k.kind != Kind::Bool)
    throw PickleArenaError(std::string("dict key of type ") + pickle_kind_name(k.kind) + " (only str, int, bool, None)");
  auto& items = out_.values[dict].items;
  const auto found = dict_index_.find(dk);
  if (found != dict_index_.end()) {
    items[found->second + 1] = value;  // Python: a repeated key replaces the value
    return;
  }
  charge(kNodeBytes);
  dict_index_.emplace(dk, items.size());
  reserve_one(items);
  items.push_back(key);
  reserve_one(items);
  items.push_back(value);
}

void PickleArena::append(std::size_t list, std::size_t item, const char* op) {
  if (out_.values[list].kind != Kind::List)
    throw PickleArenaError(std::string(op) + " on a " + pickle_kind_name(out_.values[list].kind) + ", not a list");
  reserve_one(out_.values[list].items);
  out_.values[list].items.push_back(item);
}

// Python's pickler numbers the memo 0, 1, 2, ... (one index per store, each store at least
// one byte), so it never writes an index at or past the pickle's size.
void PickleArena::memo_put(std::uint64_t index, std::size_t value) {
  if (index >= pickle_bytes_)
    throw PickleArenaError("memo index " + std::to_string(index) + " at or past the pickle's " +
                           std::to_string(pickle_bytes_) + " bytes (a pickle numbers its memo from 0, one index per store)");
  if (index >= memo_.size()) {
    const std::size_t size = std::min<std::size_t>(pickle_bytes_, std::max<std::size_t>(index + 1, 2 * memo_.size()));
    charge((size - memo_.size()) * sizeof(std::size_t));
    memo_.resize(size, kUnset);
  }
  memo_stored_ += memo_[index] == kUnset;
  memo_[index] = value;
}

std::size_t PickleArena::memo_get(std::uint64_t index) const {
  if (index >= memo_.size() || memo_[index] == kUnset)
    throw PickleArenaError("memo index " + std::to_string(index) + " read before it was stored");
  return memo_[index];
}

std::pair<std::size_t, bool> PickleArena::storage(std::int64_t key_id, const PickleStorage& s) {
  const auto found = storage_index_.find(key_id);
  if (found != storage_index_.end()) return {found->second, false};
  charge(kNodeBytes + s.type.size() + s.key.size() + s.location.size());
  reserve_one(out_.storages);
  storage_index_.emplace(key_id, out_.storages.size());
  out_.storages.push_back(s);
  return {out_.storages.size() - 1, true};
}

std::size_t PickleArena::tensor(PickleTensor t) {
  charge((t.size.size() + t.stride.size()) * sizeof(std::int64_t));
  reserve_one(out_.tensors);
  out_.tensors.push_back(std::move(t));
  return out_.tensors.size() - 1;
}

TorchPickle PickleArena::finish(std::size_t root) {
  out_.root = root;
  out_.memory_used = used_;
  return std::move(out_);
}

}  // namespace tapegrad::io
