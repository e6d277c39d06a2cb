#pragma once
// Loading a checkpoint file into a module, whatever wrote it: a PyTorch torch.save file
// (io/torch_archive.h) or a safetensors file (tapegrad's own checkpoints, core/safetensors.h),
// told apart by their first bytes. Keys can be reshaped on the way (a prefix stripped, paths
// renamed: layers/state_dict_keys.h) and the module's load_state_dict semantics apply
// (floating dtypes cast and reported, an old BatchNorm's num_batches_tracked filled with 0,
// atomic: a failed load changes nothing).
#include <string>
#include <vector>

#include <tapegrad/io/torch_tensors.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/layers/state_dict_keys.h>

namespace tapegrad::io {

/// The two checkpoint formats read here.
enum class CheckpointFormat { Torch, Safetensors };
/// "torch.save" or "safetensors".
const char* checkpoint_format_name(CheckpointFormat f);

/// The format of the file at `path` from its first bytes: a zip archive ("PK\x03\x04") is a
/// torch.save file, anything else is read as safetensors (whose reader names what is wrong).
/// Throws std::runtime_error naming the path when it cannot be read or is a legacy
/// (PyTorch < 1.6) torch.save file (io/torch_archive.h: kLegacyTorchSaveMessage).
CheckpointFormat detect_checkpoint_format(const std::string& path);

/// How io::load reads a file and maps its keys onto a module.
struct LoadOptions {
  bool strict = true;                        ///< Module::load_state_dict's strict
  std::vector<std::string> strip_prefixes;   ///< strip_prefix for each, in order ("module.")
  std::vector<layers::KeyRename> renames;    ///< rename_keys, after the prefixes
  TorchReadOptions torch;                    ///< half_to_float32, entry, max_bytes (torch.save files)
};

/// A file's tensors after the key changes, and what was changed.
struct ReadResult {
  layers::StateDict tensors;  ///< the tensors under their final keys
  CheckpointFormat format = CheckpointFormat::Safetensors;  ///< what the file was
  std::vector<std::string> converted;  ///< "key: float16 -> float32 (in the file)"
  std::vector<std::string> notes;      ///< "stripped 'module.' from 5 keys", "renamed fc1 -> 0 (2 keys)"
};

/// Reads `path` (either format) and applies options.strip_prefixes and options.renames.
/// Throws std::runtime_error for an unreadable, corrupt or hostile file (naming the path and
/// the problem) and std::invalid_argument for a prefix or rename that does not apply.
ReadResult read_checkpoint(const std::string& path, const LoadOptions& options = {});

/// read_checkpoint, then module.load_state_dict(tensors, options.strict). The result's
/// `converted` also lists conversions made while reading. Strict and mismatched: throws
/// std::invalid_argument naming the path, every problem and the key structure, and the module
/// is unchanged.
layers::LoadResult load(layers::Module& module, const std::string& path, const LoadOptions& options = {});

}  // namespace tapegrad::io
