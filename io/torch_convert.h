#pragma once
// A PyTorch state dict file as a safetensors file with the same keys (after the optional key
// changes): what `tapegrad_convert torch IN.pt OUT.safetensors` does.
#include <string>

#include <tapegrad/io/torch_load.h>

namespace tapegrad::io {

/// Reads the torch.save file `in` (read_checkpoint: options.strip_prefixes, options.renames and
/// options.half_to_float32, entry and max_bytes apply; options.strict is unused) and writes its tensors to `out` atomically
/// as safetensors, in the file's order, with metadata {"format": "tapegrad-converted",
/// "source_format": "torch.save"}. Returns the report: "read IN (torch.save): N tensors", one
/// line per conversion and key change, "wrote OUT: N tensors, B bytes". safetensors cannot
/// express aliasing, so tensors sharing a storage are each written in full; the output's
/// tensor bytes must fit options.max_bytes (default: 4 x IN's size + 1 MiB), else
/// std::runtime_error (naming the sizes and the aliasing count) and nothing is written. Throws
/// std::runtime_error for an unreadable or hostile input (nothing is written) or an unwritable
/// output, std::invalid_argument when `in` is not a torch.save file or a key change does not apply.
std::string convert_torch_to_safetensors(const std::string& in, const std::string& out, const LoadOptions& options = {});

}  // namespace tapegrad::io
