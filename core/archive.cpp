#include <tapegrad/core/archive.h>

#include <stdexcept>

namespace tapegrad {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

Archive::Archive(SafetensorsContent content, std::string source)
    : content_(std::move(content)), source_(std::move(source)) {
  for (const auto& [k, t] : content_.tensors) written_.insert(k);
}

void Archive::write(const std::string& key, const Tensor& tensor) {
  if (key.empty()) throw std::invalid_argument("Archive::write: expected a non-empty key, got ''");
  if (key == "__metadata__") throw std::invalid_argument("Archive::write: the key '__metadata__' is reserved");
  if (!tensor.defined()) throw std::invalid_argument("Archive::write: tensor '" + key + "' is undefined");
  if (!written_.insert(key).second) throw std::invalid_argument("Archive::write: key '" + key + "' written twice");
  content_.tensors.emplace_back(key, tensor);
}

void Archive::write_all(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [k, t] : tensors) write(prefix + k, t);
}

void Archive::set_metadata(const std::string& key, const std::string& value) { content_.metadata[key] = value; }

const Tensor* Archive::find(const std::string& key) const { return content_.find(key); }

std::vector<std::pair<std::string, Tensor>> Archive::with_prefix(const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [k, t] : content_.tensors) {
    if (!starts_with(k, prefix)) continue;
    if (prefix.empty() && starts_with(k, kArchiveExtraPrefix)) continue;
    out.emplace_back(k.substr(prefix.size()), t);
  }
  return out;
}

std::string Archive::metadata(const std::string& key, const std::string& fallback) const {
  const auto it = content_.metadata.find(key);
  return it == content_.metadata.end() ? fallback : it->second;
}

void Archive::save(const std::string& path) const { save_safetensors(path, content_.tensors, content_.metadata); }

Archive Archive::load(const std::string& path) { return Archive(load_safetensors(path), path); }

}  // namespace tapegrad
