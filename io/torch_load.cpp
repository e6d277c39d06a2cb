#include <tapegrad/io/torch_load.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/io/torch_archive.h>

namespace tapegrad::io {

const char* checkpoint_format_name(CheckpointFormat f) {
  return f == CheckpointFormat::Torch ? "torch.save" : "safetensors";
}

CheckpointFormat detect_checkpoint_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("'" + path + "': cannot open the file");
  char magic[16] = {};
  in.read(magic, sizeof magic);
  const auto got = static_cast<std::size_t>(in.gcount());
  if (is_legacy_torch_save(reinterpret_cast<const std::uint8_t*>(magic), got))
    throw std::runtime_error("'" + path + "': torch.save file: " + kLegacyTorchSaveMessage);
  return got >= 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0 ? CheckpointFormat::Torch
                                                                 : CheckpointFormat::Safetensors;
}

ReadResult read_checkpoint(const std::string& path, const LoadOptions& options) {
  ReadResult r;
  r.format = detect_checkpoint_format(path);
  if (r.format == CheckpointFormat::Torch) {
    r.tensors = read_torch_file(path, options.torch, &r.converted);
  } else {
    for (auto& [k, t] : load_safetensors(path).tensors) r.tensors.insert(k, t);
  }
  for (const auto& prefix : options.strip_prefixes) {
    std::size_t n = 0;
    for (auto& [k, t] : r.tensors) n += k.size() > prefix.size() && k.compare(0, prefix.size(), prefix) == 0;
    r.tensors = layers::strip_prefix(r.tensors, prefix);
    r.notes.push_back("stripped '" + prefix + "' from " + std::to_string(n) + " key" + (n == 1 ? "" : "s"));
  }
  if (!options.renames.empty()) {
    r.tensors = layers::rename_keys(r.tensors, options.renames);
    for (const auto& rn : options.renames) r.notes.push_back("renamed " + rn.from + " -> " + rn.to);
  }
  return r;
}

layers::LoadResult load(layers::Module& module, const std::string& path, const LoadOptions& options) {
  ReadResult r = read_checkpoint(path, options);
  layers::LoadResult res;
  try {
    res = module.load_state_dict(r.tensors, options.strict);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("loading '" + path + "' (" + checkpoint_format_name(r.format) + "): " + e.what());
  }
  res.converted.insert(res.converted.begin(), r.converted.begin(), r.converted.end());
  return res;
}

}  // namespace tapegrad::io
