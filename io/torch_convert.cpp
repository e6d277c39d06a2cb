#include <tapegrad/io/torch_convert.h>

#include <stdexcept>

#include <tapegrad/core/safetensors.h>

namespace tapegrad::io {

std::string convert_torch_to_safetensors(const std::string& in, const std::string& out, const LoadOptions& options) {
  if (detect_checkpoint_format(in) != CheckpointFormat::Torch)
    throw std::invalid_argument("'" + in + "' is not a torch.save file (a zip archive starting with 'PK\\x03\\x04')");
  const ReadResult r = read_checkpoint(in, options);
  std::string report = "read " + in + " (torch.save): " + std::to_string(r.tensors.size()) + " tensors";
  for (const auto& c : r.converted) report += "\n  converted " + c;
  for (const auto& n : r.notes) report += "\n  " + n;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::size_t bytes = 0;
  for (const auto& [k, t] : r.tensors) {
    tensors.emplace_back(k, t);
    bytes += t.nbytes();
  }
  save_safetensors(out, tensors, {{"format", "tapegrad-converted"}, {"source_format", "torch.save"}});
  report += "\nwrote " + out + ": " + std::to_string(tensors.size()) + " tensors, " + std::to_string(bytes) + " bytes";
  return report;
}

}  // namespace tapegrad::io
