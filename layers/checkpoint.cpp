#include <tapegrad/layers/checkpoint.h>

#include <set>
#include <stdexcept>

namespace tapegrad::layers {

namespace {

bool is_reserved_key(const std::string& k) {
  return k == "format" || k == "format_version" || k == "content" || k == "module";
}

bool is_extra(const std::string& k) { return k.rfind(kExtraTensorPrefix, 0) == 0; }

CheckpointExtras extras_of(const Archive& a) {
  CheckpointExtras x;
  x.tensors = a.extras();
  for (auto& [k, v] : a.metadata())
    if (!is_reserved_key(k)) x.metadata.emplace(k, v);
  return x;
}

}  // namespace

void check_extra_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& [k, t] : tensors) {
    if (k.empty()) throw std::invalid_argument(where + ": an extra tensor has an empty name");
    if (!seen.insert(k).second) throw std::invalid_argument(where + ": extra tensor '" + k + "' given twice");
    if (!t.defined()) throw std::invalid_argument(where + ": extra tensor '" + k + "' is undefined");
  }
}

const Tensor* CheckpointExtras::find(const std::string& name) const {
  for (const auto& [k, t] : tensors)
    if (k == name) return &t;
  return nullptr;
}

void write_checkpoint(Archive& archive, const Module& module, const SaveOptions& options, const std::string& path) {
  for (auto& [k, t] : module.state_dict())
    if (is_extra(k))
      throw std::invalid_argument("save '" + path + "': the module's state key '" + k + "' starts with '" +
                                  kExtraTensorPrefix + "', the prefix reserved for extra tensors");
  check_extra_tensors(options.extra_tensors, "save '" + path + "'");
  for (const auto& [k, v] : options.metadata)
    if (is_reserved_key(k))
      throw std::invalid_argument("save '" + path + "': metadata key '" + k +
                                  "' is reserved (format, format_version, content, module)");
  module.save_to(archive, "", options.include_buffers);
  archive.write_all(kExtraTensorPrefix, options.extra_tensors);
  archive.set_metadata("format", kCheckpointFormat);
  archive.set_metadata("format_version", "1");
  archive.set_metadata("content", options.include_buffers ? "parameters+buffers" : "parameters");
  archive.set_metadata("module", module.type_name());
  for (const auto& [k, v] : options.metadata) archive.set_metadata(k, v);
}

LoadedCheckpoint load_checkpoint(Module& module, const Archive& archive, const LoadOptions& options) {
  LoadedCheckpoint out;
  try {
    out.result = module.load_from(archive, options);
  } catch (const std::invalid_argument& e) {
    std::string msg = "loading '" + archive.source() + "': " + e.what();
    if (archive.metadata("content") == "parameters")
      msg += " (the file holds parameters only: it was saved without buffers such as running_mean and running_var)";
    throw std::invalid_argument(msg);
  }
  out.extras = extras_of(archive);
  return out;
}

void save(const Module& module, const std::string& path, bool include_buffers) {
  save(module, path, SaveOptions{.include_buffers = include_buffers});
}

void save(const Module& module, const std::string& path, const SaveOptions& options) {
  Archive a;
  write_checkpoint(a, module, options, path);
  a.save(path);
}

StateDict load_state_dict_file(const std::string& path) { return state_dict_under(Archive::load(path), ""); }

LoadResult load(Module& module, const std::string& path, bool strict) {
  return load(module, path, LoadOptions{.strict = strict});
}

LoadResult load(Module& module, const std::string& path, const LoadOptions& options) {
  return load_checkpoint(module, Archive::load(path), options).result;
}

LoadedCheckpoint load_checkpoint(Module& module, const std::string& path, bool strict) {
  return load_checkpoint(module, path, LoadOptions{.strict = strict});
}

LoadedCheckpoint load_checkpoint(Module& module, const std::string& path, const LoadOptions& options) {
  return load_checkpoint(module, Archive::load(path), options);
}

CheckpointExtras load_checkpoint_extras(const std::string& path) { return extras_of(Archive::load(path)); }

}  // namespace tapegrad::layers
