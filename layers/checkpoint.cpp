#include <tapegrad/layers/checkpoint.h>

#include <set>
#include <stdexcept>

#include <tapegrad/core/safetensors.h>

namespace tapegrad::layers {

namespace {

bool is_reserved_key(const std::string& k) {
  return k == "format" || k == "format_version" || k == "content" || k == "module";
}

bool is_extra(const std::string& k) { return k.rfind(kExtraTensorPrefix, 0) == 0; }

void write(const Module& module, const std::string& path, bool include_buffers,
           const std::vector<std::pair<std::string, Tensor>>& extra_tensors,
           const std::map<std::string, std::string>& user_metadata) {
  std::set<std::string> params;
  for (auto& [k, p] : module.named_parameters()) params.insert(k);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [k, t] : module.state_dict()) {
    if (is_extra(k))
      throw std::invalid_argument("save '" + path + "': the module's state key '" + k + "' starts with '" +
                                  kExtraTensorPrefix + "', the prefix reserved for extra tensors");
    if (include_buffers || params.count(k)) tensors.emplace_back(k, t);
  }
  std::set<std::string> seen;
  for (const auto& [k, t] : extra_tensors) {
    if (k.empty()) throw std::invalid_argument("save '" + path + "': an extra tensor has an empty name");
    if (!seen.insert(k).second)
      throw std::invalid_argument("save '" + path + "': extra tensor '" + k + "' given twice");
    if (!t.defined()) throw std::invalid_argument("save '" + path + "': extra tensor '" + k + "' is undefined");
    tensors.emplace_back(kExtraTensorPrefix + k, t);
  }
  std::map<std::string, std::string> metadata{{"format", kCheckpointFormat},
                                              {"format_version", "1"},
                                              {"content", include_buffers ? "parameters+buffers" : "parameters"},
                                              {"module", module.type_name()}};
  for (const auto& [k, v] : user_metadata) {
    if (is_reserved_key(k))
      throw std::invalid_argument("save '" + path + "': metadata key '" + k +
                                  "' is reserved (format, format_version, content, module)");
    metadata.emplace(k, v);
  }
  save_safetensors(path, tensors, metadata);
}

// The module's tensors of a file (extras left out).
StateDict module_state(const SafetensorsContent& c) {
  StateDict d;
  for (auto& [k, t] : c.tensors)
    if (!is_extra(k)) d.insert(k, t);
  return d;
}

CheckpointExtras extras_of(const SafetensorsContent& c) {
  CheckpointExtras x;
  const std::size_t n = std::string(kExtraTensorPrefix).size();
  for (auto& [k, t] : c.tensors)
    if (is_extra(k)) x.tensors.emplace_back(k.substr(n), t);
  for (auto& [k, v] : c.metadata)
    if (!is_reserved_key(k)) x.metadata.emplace(k, v);
  return x;
}

LoadResult load_into(Module& module, const std::string& path, const SafetensorsContent& c,
                     const LoadOptions& options) {
  try {
    return module.load_state_dict(module_state(c), options);
  } catch (const std::invalid_argument& e) {
    std::string msg = "loading '" + path + "': " + e.what();
    auto it = c.metadata.find("content");
    if (it != c.metadata.end() && it->second == "parameters")
      msg += " (the file holds parameters only: it was saved without buffers such as running_mean and running_var)";
    throw std::invalid_argument(msg);
  }
}

}  // namespace

const Tensor* CheckpointExtras::find(const std::string& name) const {
  for (const auto& [k, t] : tensors)
    if (k == name) return &t;
  return nullptr;
}

void save(const Module& module, const std::string& path, bool include_buffers) {
  write(module, path, include_buffers, {}, {});
}

void save(const Module& module, const std::string& path, const SaveOptions& options) {
  write(module, path, options.include_buffers, options.extra_tensors, options.metadata);
}

StateDict load_state_dict_file(const std::string& path) { return module_state(load_safetensors(path)); }

LoadResult load(Module& module, const std::string& path, bool strict) {
  return load(module, path, LoadOptions{strict, true});
}

LoadResult load(Module& module, const std::string& path, const LoadOptions& options) {
  return load_into(module, path, load_safetensors(path), options);
}

LoadedCheckpoint load_checkpoint(Module& module, const std::string& path, bool strict) {
  const SafetensorsContent c = load_safetensors(path);
  LoadedCheckpoint out;
  out.result = load_into(module, path, c, LoadOptions{strict, true});
  out.extras = extras_of(c);
  return out;
}

CheckpointExtras load_checkpoint_extras(const std::string& path) { return extras_of(load_safetensors(path)); }

}  // namespace tapegrad::layers
