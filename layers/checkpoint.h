#pragma once
// Module checkpoints as safetensors files (core/safetensors.h).
//
// A checkpoint holds the module's state_dict: parameters and persistent buffers
// (running_mean, running_var, num_batches_tracked) under PyTorch's dotted names
// ("0.weight", "blocks.2.norm.bias"), with metadata
//   {"format": "tapegrad-checkpoint", "format_version": "1",
//    "content": "parameters+buffers" | "parameters", "module": type name}.
// Files are written atomically: a failed save leaves the old file intact.
//
// Extras: an application's own tensors and strings stored beside the module's state, e.g.
// the input preprocessing, so that the file alone reproduces predictions:
//   layers::save(model, "model.safetensors",
//                {.extra_tensors = {{"standardizer.mean", m}, {"standardizer.std", s}},
//                 .metadata = {{"classes", "setosa,versicolor,virginica"}}});
//   layers::LoadedCheckpoint ck = layers::load_checkpoint(model, "model.safetensors");
//   const Tensor* m = ck.extras.find("standardizer.mean");
// In the file an extra tensor "x" is stored as "extra/x" (so it can never be taken for a
// module key; numpy/PyTorch readers see "extra/x") and user metadata keys as they are.
//
// Every function here goes through one Archive (core/archive.h), read once: save() is
// Module::save_to + Archive::save, load() is Archive::load + Module::load_from. A torch.save
// file loads through io::load (io/torch_load.h), the same Module::load_from and LoadOptions.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/layers/module.h>

namespace tapegrad::layers {

/// Value of the "format" metadata key of module checkpoints.
inline constexpr const char* kCheckpointFormat = "tapegrad-checkpoint";

/// Prefix of extra tensors' names in the file (Archive's kArchiveExtraPrefix).
inline constexpr const char* kExtraTensorPrefix = kArchiveExtraPrefix;

/// An application's tensors and string metadata carried beside a module's state.
struct CheckpointExtras {
  /// Named tensors, written in this order (any dtype of core; names non-empty, unique).
  std::vector<std::pair<std::string, Tensor>> tensors;
  /// Strings; the keys "format", "format_version", "content" and "module" are reserved.
  std::map<std::string, std::string> metadata;
  /// The tensor named `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

/// Checks the extra tensors of a save before anything is written: names non-empty and
/// unique, tensors defined. Throws std::invalid_argument starting with `where` and naming the
/// tensor (e.g. "save 'a.safetensors': extra tensor 'x' given twice").
void check_extra_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& where);

/// How save() writes a checkpoint (designated initialisers: {.extra_tensors = ...}).
struct SaveOptions {
  std::vector<std::pair<std::string, Tensor>> extra_tensors{};  ///< see CheckpointExtras::tensors
  std::map<std::string, std::string> metadata{};              ///< see CheckpointExtras::metadata
  bool include_buffers = true;                                ///< as save()'s include_buffers
};

/// Saves module.state_dict() (include_buffers = false: parameters only, the classic
/// "weights without buffers" mistake, kept for studying it) to `path`. Throws
/// std::runtime_error when the file cannot be written.
void save(const Module& module, const std::string& path, bool include_buffers = true);

/// Saves module.state_dict() and the extras of `options` to `path`, atomically. Throws
/// std::invalid_argument (and writes nothing) for an undefined extra tensor, an empty or
/// duplicate name, or a reserved metadata key (naming it); std::runtime_error when the
/// file cannot be written.
void save(const Module& module, const std::string& path, const SaveOptions& options);

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
/// load() with every option spelled out (LoadOptions::strict, LoadOptions::check_values).
LoadResult load(Module& module, const std::string& path, const LoadOptions& options);

/// A checkpoint read back into a module (load_checkpoint; for a training checkpoint
/// train::load_model): what the load did and everything the file holds beside the module.
struct LoadedCheckpoint {
  LoadResult result;        ///< what loading into the module did
  /// Extra tensors and metadata: the "extra/" tensors (names without the prefix; a training
  /// checkpoint of format 1 kept them at the top level) and, for a module checkpoint, the user
  /// metadata; for a training checkpoint all of its metadata (history, callback states).
  CheckpointExtras extras;
  /// Training checkpoints: the epoch the file was written after; 0 for a module checkpoint.
  std::int64_t epoch = 0;
  /// The extra tensor `name`, or nullptr (extras.find).
  const Tensor* find(const std::string& name) const { return extras.find(name); }
};

/// Writes a module checkpoint (module.save_to, the extras under "extra/", the metadata at the
/// top of this header) into `archive`. Throws as save(const Module&, const std::string&,
/// const SaveOptions&), with `path` naming the file in messages.
void write_checkpoint(Archive& archive, const Module& module, const SaveOptions& options,
                      const std::string& path = "");
/// Loads a module checkpoint already read into `archive` (its "extra/" tensors are left out),
/// with load()'s checks and messages; the extras are returned beside the result.
LoadedCheckpoint load_checkpoint(Module& module, const Archive& archive, const LoadOptions& options);

/// load() that also returns the extras (a file without extras gives empty ones). The
/// module is loaded exactly as load() does (strict: all or nothing), and throws as it.
LoadedCheckpoint load_checkpoint(Module& module, const std::string& path, bool strict = true);
/// load_checkpoint with every option spelled out (LoadOptions).
LoadedCheckpoint load_checkpoint(Module& module, const std::string& path, const LoadOptions& options);

/// The extras of a checkpoint file, without a module. Throws as load().
CheckpointExtras load_checkpoint_extras(const std::string& path);

/// The file's module tensors as a StateDict (file order, extras left out), without a module.
StateDict load_state_dict_file(const std::string& path);

}  // namespace tapegrad::layers
