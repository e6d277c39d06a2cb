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

/// How io::load reads a file and maps its keys onto a module: the one LoadOptions
/// (layers/module.h: strict, check_values, strip_prefixes, renames, and for torch.save files
/// half_to_float32, entry, max_bytes).
using LoadOptions = layers::LoadOptions;

/// The reader options of a torch.save file from `options` (half_to_float32, entry, max_bytes).
TorchReadOptions torch_read_options(const LoadOptions& options);

/// A file's tensors after the key changes, and what was changed.
struct ReadResult {
  layers::StateDict tensors;  ///< the tensors under their final keys (a tapegrad file's extras left out)
  CheckpointFormat format = CheckpointFormat::Safetensors;  ///< what the file was
  std::vector<std::string> converted;  ///< "key: float16 -> float32 (in the file)"
  std::vector<std::string> notes;      ///< "stripped 'module.' from 5 keys", "renamed fc1 -> 0 (2 keys)"
};

/// The file at `path` as an Archive (core/archive.h), whatever wrote it: a safetensors file
/// as it is, a torch.save file's state dict under its keys (metadata "source_format" =
/// "torch.save"). `format` and `converted` (dtype casts made while reading) are filled when
/// given. Throws std::runtime_error for an unreadable, corrupt or hostile file, naming the
/// path and the problem.
Archive read_archive(const std::string& path, const LoadOptions& options = {}, CheckpointFormat* format = nullptr,
                     std::vector<std::string>* converted = nullptr);

/// Reads `path` (either format) and applies options.strip_prefixes and options.renames.
/// Throws std::runtime_error for an unreadable, corrupt or hostile file (naming the path and
/// the problem) and std::invalid_argument for a prefix or rename that does not apply.
ReadResult read_checkpoint(const std::string& path, const LoadOptions& options = {});

/// The one load for a module from a file of either format: read_archive, then
/// module.load_from (the key changes, the strict and value checks and the per-layer fix-ups
/// of layers/module.h, as layers::load). The result's `converted` also lists conversions made
/// while reading. A failed load throws std::invalid_argument naming the path, the format,
/// every problem and the key structure, and the module is unchanged.
layers::LoadResult load(layers::Module& module, const std::string& path, const LoadOptions& options = {});

}  // namespace tapegrad::io
