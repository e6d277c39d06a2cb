#pragma once
// Module checkpoints as safetensors files (core/safetensors.h).
//
// A checkpoint holds the module's state_dict: parameters and persistent buffers
// (running_mean, running_var, num_batches_tracked) under PyTorch's dotted names
// ("0.weight", "blocks.2.norm.bias"), with metadata
//   {"format": "tapegrad-checkpoint", "format_version": "1",
//    "content": "parameters+buffers" | "parameters", "module": type name}.
// Files are written atomically: a failed save leaves the old file intact.
#include <string>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Value of the "format" metadata key of module checkpoints.
inline constexpr const char* kCheckpointFormat = "tapegrad-checkpoint";

/// Saves module.state_dict() (include_buffers = false: parameters only, the classic
/// "weights without buffers" mistake, kept for studying it) to `path`. Throws
/// std::runtime_error when the file cannot be written.
void save(const Module& module, const std::string& path, bool include_buffers = true);

/// Loads a checkpoint into `module` via load_state_dict (PyTorch-like semantics: floating
/// data of another floating dtype is cast to the module's and reported in
/// LoadResult::converted; an absent num_batches_tracked beside running_mean/running_var is
/// set to 0 and reported in LoadResult::filled). strict: throws std::invalid_argument listing
/// every missing key (e.g. "1.running_mean", "1.running_var" when the file holds parameters
/// only), unexpected key and shape/kind mismatch, and changes nothing. Non-strict: applies
/// what matches and returns the rest. A corrupt or unreadable file throws
/// std::runtime_error naming the path, the problem and its byte offset. PyTorch's .pt files
/// load through io::load (io/torch_load.h).
/// Impossible values (a NaN weight, a negative running_var or num_batches_tracked) throw
/// std::invalid_argument naming the path and the tensors, unless options.check_values is
/// false (see LoadOptions).
LoadResult load(Module& module, const std::string& path, bool strict = true);
LoadResult load(Module& module, const std::string& path, const LoadOptions& options);

/// The file's tensors as a StateDict (file order), without a module.
StateDict load_state_dict_file(const std::string& path);

}  // namespace tapegrad::layers
