#include <tapegrad/layers/checkpoint.h>

#include <set>
#include <stdexcept>

#include <tapegrad/core/safetensors.h>

namespace tapegrad::layers {

void save(const Module& module, const std::string& path, bool include_buffers) {
  std::set<std::string> params;
  for (auto& [k, p] : module.named_parameters()) params.insert(k);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [k, t] : module.state_dict())
    if (include_buffers || params.count(k)) tensors.emplace_back(k, t);
  save_safetensors(path, tensors,
                   {{"format", kCheckpointFormat},
                    {"format_version", "1"},
                    {"content", include_buffers ? "parameters+buffers" : "parameters"},
                    {"module", module.type_name()}});
}

StateDict load_state_dict_file(const std::string& path) {
  SafetensorsContent c = load_safetensors(path);
  StateDict d;
  for (auto& [k, t] : c.tensors) d.insert(k, t);
  return d;
}

LoadResult load(Module& module, const std::string& path, bool strict) {
  return load(module, path, LoadOptions{strict, true});
}

LoadResult load(Module& module, const std::string& path, const LoadOptions& options) {
  SafetensorsContent c = load_safetensors(path);
  StateDict d;
  for (auto& [k, t] : c.tensors) d.insert(k, t);
  try {
    return module.load_state_dict(d, options);
  } catch (const std::invalid_argument& e) {
    std::string msg = "loading '" + path + "': " + e.what();
    auto it = c.metadata.find("content");
    if (it != c.metadata.end() && it->second == "parameters")
      msg += " (the file holds parameters only: it was saved without buffers such as running_mean and running_var)";
    throw std::invalid_argument(msg);
  }
}

}  // namespace tapegrad::layers
