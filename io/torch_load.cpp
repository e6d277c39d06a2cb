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

TorchReadOptions torch_read_options(const LoadOptions& options) {
  TorchReadOptions t;
  t.half_to_float32 = options.half_to_float32;
  t.entry = options.entry;
  t.max_bytes = options.max_bytes;
  return t;
}

Archive read_archive(const std::string& path, const LoadOptions& options, CheckpointFormat* format,
                     std::vector<std::string>* converted) {
  const CheckpointFormat f = detect_checkpoint_format(path);
  if (format) *format = f;
  if (f == CheckpointFormat::Safetensors) return Archive::load(path);
  std::vector<std::string> conv;
  const layers::StateDict tensors = read_torch_file(path, torch_read_options(options), &conv);
  if (converted) *converted = std::move(conv);
  SafetensorsContent c;
  for (const auto& [k, t] : tensors) c.tensors.emplace_back(k, t);
  c.metadata["source_format"] = checkpoint_format_name(f);
  return Archive(std::move(c), path);
}

ReadResult read_checkpoint(const std::string& path, const LoadOptions& options) {
  ReadResult r;
  const Archive a = read_archive(path, options, &r.format, &r.converted);
  r.tensors = layers::apply_key_changes(layers::state_dict_under(a, ""), options, &r.notes);
  return r;
}

layers::LoadResult load(layers::Module& module, const std::string& path, const LoadOptions& options) {
  CheckpointFormat format = CheckpointFormat::Safetensors;
  std::vector<std::string> converted;
  const Archive a = read_archive(path, options, &format, &converted);
  layers::LoadResult res;
  try {
    res = module.load_from(a, options);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("loading '" + path + "' (" + checkpoint_format_name(format) + "): " + e.what());
  }
  res.converted.insert(res.converted.begin(), converted.begin(), converted.end());
  return res;
}

}  // namespace tapegrad::io
