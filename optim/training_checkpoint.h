#pragma once
// Training checkpoints for exact resume: model state (parameters + buffers), optimizer
// state, scheduler state, the epoch counter and the random generator's state, in one
// safetensors file (core/safetensors.h), written atomically.
//
// Keys: "model.<state_dict key>", "optimizer.<key>" (see OptimizerState),
// "scheduler.<key>", "epoch" (int64 scalar), "extra/<name>" (an application's extras, as in
// module checkpoints). Metadata: "format" = "tapegrad-training-checkpoint", "format_version" =
// "2", "optimizer" (type name), "scheduler" (type name or "none"), "rng_state"
// (Generator::get_state(), when saved), and the extras' metadata. Format 1 (the same but for
// the extras, stored under their own names at the top level) still loads.
//
// Resuming is bitwise exact: N steps straight give the same parameters, buffers and
// optimizer state as k steps, save, load into fresh objects, N - k steps.
//
// The file is one Archive (core/archive.h): each part writes itself with its save_to
// (Module, Optimizer, LRScheduler) and reads itself back with its load_from, from the archive
// read once (train::fit's resume reads the history and the callbacks' states from the same
// archive).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/optimizer.h>

namespace tapegrad::optim {

/// The "format" metadata value that marks a training checkpoint file.
inline constexpr const char* kTrainingCheckpointFormat = "tapegrad-training-checkpoint";
/// The "format_version" this library writes; it reads "1" as well.
inline constexpr const char* kTrainingCheckpointVersion = "2";

/// What an application stores beside the training state (e.g. the input preprocessing,
/// so that a checkpoint alone reproduces predictions). The same type as layers::save's
/// extras (layers/checkpoint.h), stored the same way: tensor "x" as "extra/x" (names
/// non-empty and unique); metadata keys must not be the ones listed above.
/// load_training_checkpoint ignores both; training_checkpoint_extras reads the tensors.
using CheckpointExtras = layers::CheckpointExtras;

/// Checks that `archive` is a training checkpoint this library reads, before anything is
/// loaded: "format" kTrainingCheckpointFormat, "format_version" 1 or 2 (format 2: no tensor
/// outside model., optimizer., scheduler., "epoch" and "extra/<name>"), an int64 scalar "epoch"
/// (shape [], as written) >= 0.
/// Returns the epoch. Throws std::invalid_argument starting "<who>('<archive.source()>'): ",
/// naming the expected and the actual value.
std::int64_t check_training_checkpoint(const Archive& archive, const std::string& who = "load_training_checkpoint");

/// The extra tensors of a training checkpoint already read, names without "extra/", in file
/// order; for a format-1 file (or one without a format_version), every tensor that is not
/// model, optimizer or scheduler state nor "epoch". Throws std::invalid_argument for another
/// format_version.
std::vector<std::pair<std::string, Tensor>> training_checkpoint_extras(const Archive& archive);

/// Saves everything needed to resume. scheduler, generator and extras are optional
/// (nullptr). Throws std::runtime_error when the file cannot be written (the old file
/// stays intact), std::invalid_argument for epoch < 0, an extra tensor with an empty or
/// repeated name or undefined, or extra metadata under a reserved key (nothing written then).
void save_training_checkpoint(const std::string& path, const layers::Module& model, const Optimizer& optimizer,
                              std::int64_t epoch, const LRScheduler* scheduler = nullptr,
                              const Generator* generator = nullptr, const CheckpointExtras* extras = nullptr);

/// Writes what save_training_checkpoint saves into `archive` (the file's name `path` only
/// for messages). Throws as save_training_checkpoint, before anything is written.
void write_training_checkpoint(Archive& archive, const layers::Module& model, const Optimizer& optimizer,
                               std::int64_t epoch, const LRScheduler* scheduler = nullptr,
                               const Generator* generator = nullptr, const CheckpointExtras* extras = nullptr,
                               const std::string& path = "");

/// load_training_checkpoint from an archive already read (Archive::load), with the same
/// checks, all or nothing, and the same throws; messages name archive.source().
std::int64_t load_training_checkpoint(const Archive& archive, layers::Module& model, Optimizer& optimizer,
                                      LRScheduler* scheduler = nullptr, Generator* generator = nullptr);

/// Restores a training checkpoint and returns its epoch. All or nothing: the model load is
/// strict, and if anything fails (corrupt file: std::runtime_error; missing/mismatched
/// keys, an 'epoch' < 0, a different optimizer or scheduler type, a scheduler or generator
/// passed here but absent from the file or the reverse: std::invalid_argument) nothing is
/// changed.
std::int64_t load_training_checkpoint(const std::string& path, layers::Module& model, Optimizer& optimizer,
                                      LRScheduler* scheduler = nullptr, Generator* generator = nullptr);

}  // namespace tapegrad::optim
