#include <tapegrad/io/torch_convert.h>

#include <filesystem>
#include <stdexcept>
#include <unordered_set>

#include <tapegrad/core/safetensors.h>
#include <tapegrad/io/torch_archive.h>

namespace tapegrad::io {

std::string convert_torch_to_safetensors(const std::string& in, const std::string& out, const LoadOptions& options) {
  if (detect_checkpoint_format(in) != CheckpointFormat::Torch)
    throw std::invalid_argument("'" + in + "' is not a torch.save file (a zip archive starting with 'PK\\x03\\x04')");
  const ReadResult r = read_checkpoint(in, options);
  std::string report = "read " + in + " (torch.save): " + std::to_string(r.tensors.size()) + " tensors";
  for (const auto& c : r.converted) report += "\n  converted " + c;
  for (const auto& n : r.notes) report += "\n  " + n;
  // safetensors holds no aliases: a tensor sharing a storage is written out in full, and
  // those copies count against the same limit as the reader's allocations
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::uint64_t bytes = 0;
  std::size_t aliases = 0;
  std::unordered_set<const Storage*> seen;
  for (const auto& [k, t] : r.tensors) {
    tensors.emplace_back(k, t);
    bytes += t.nbytes();
    aliases += t.nbytes() > 0 && !seen.insert(t.impl()->storage.get()).second;
  }
  const std::uint64_t limit =
      options.max_bytes ? options.max_bytes : torch_default_max_bytes(std::filesystem::file_size(in));
  if (bytes > limit)
    throw std::runtime_error("'" + in + "': the safetensors output would hold " + std::to_string(bytes) +
                             " bytes of tensor data (" + std::to_string(aliases) +
                             " tensors share a storage with another and are written out in full), beyond the "
                             "limit of " + std::to_string(limit) + " bytes (TorchReadOptions::max_bytes, --max-bytes; "
                             "default 4 x the file's size + 1 MiB); nothing was written");
  save_safetensors(out, tensors, {{"format", "tapegrad-converted"}, {"source_format", "torch.save"}});
  report += "\nwrote " + out + ": " + std::to_string(tensors.size()) + " tensors, " + std::to_string(bytes) + " bytes";
  return report;
}

}  // namespace tapegrad::io
