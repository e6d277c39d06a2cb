#pragma once
// ModelCheckpoint: the best and the last training checkpoints of a run, and reading one back
// into a fresh model.
//
// After each epoch (after every callback's on_epoch_end) the main process writes
//   <path>.last  every epoch, and
//   <path>       when `monitor` improved (mode min / max, strictly, as EarlyStopping with
//                min_delta 0; the first epoch always improves),
// each with optim::save_training_checkpoint (atomic: a failed write leaves the old file
// intact): parameters and buffers ("model.*"), optimizer and scheduler state, the epoch, the
// generator's state, FitOptions::checkpoint_extras (e.g. the input preprocessing, the
// architecture), the history and every callback's state. Resume from <path>.last with
// FitOptions::resume. In a data-parallel run the other ranks wait at a barrier until the
// files exist.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>
#include <tapegrad/data/dataset.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/training_checkpoint.h>
#include <tapegrad/train/callback.h>

namespace tapegrad::train {

/// Where ModelCheckpoint writes and what makes a checkpoint the best.
struct ModelCheckpointOptions {
  std::string path;                  ///< the best checkpoint; the last goes to path + ".last"
  std::string monitor = "val_loss";  ///< empty: no best checkpoint, only the last
  /// Min (default): a lower monitored value is better; Max: higher.
  Mode mode = Mode::Min;
  /// Also write `path + ".last"` after every epoch (the file to resume from).
  bool save_last = true;
};

/// Callback writing the best and the last training checkpoints of a run (see the top of
/// this header); its state (best value and epoch) travels in every checkpoint.
class ModelCheckpoint : public Callback {
 public:
  /// Throws std::invalid_argument for an empty path.
  explicit ModelCheckpoint(ModelCheckpointOptions options);
  std::string name() const override { return "ModelCheckpoint"; }
  /// Checks both output paths (core/file_io.h check_output_file) before the first epoch:
  /// std::runtime_error naming the path and the reason.
  void on_fit_begin(TrainState& s) override;
  /// Writes the files. Throws std::invalid_argument naming the monitor and the logged keys
  /// when the epoch did not log it, std::runtime_error when it logged NaN or an infinity
  /// (nothing written) or a file cannot be written.
  void after_epoch_end(TrainState& s) override;
  std::map<std::string, std::string> state_dict() const override;
  void load_state_dict(const std::map<std::string, std::string>& state) override;

  /// Path of the best checkpoint (ModelCheckpointOptions::path).
  const std::string& best_path() const { return o_.path; }
  /// Path of the last checkpoint: path + ".last".
  std::string last_path() const { return o_.path + ".last"; }
  double best() const { return best_; }        ///< NaN before the first epoch
  int best_epoch() const { return best_epoch_; }  ///< 0: none yet

 private:
  ModelCheckpointOptions o_;
  double best_;
  int best_epoch_ = 0;
};

/// A training checkpoint read back for inference: the one checkpoint result type
/// (layers/checkpoint.h). load_model fills `result`, `epoch` and `extras`: the extra tensors
/// (optim::training_checkpoint_extras) and all of the file's metadata.
using LoadedCheckpoint = layers::LoadedCheckpoint;

/// Loads the "model.*" tensors of a training checkpoint into `model` (strict: every key must
/// match in name, shape and dtype, else std::invalid_argument listing them and nothing
/// changes) and returns the rest. std::runtime_error for an unreadable or corrupt file.
LoadedCheckpoint load_model(const std::string& path, layers::Module& model, bool strict = true);
/// load_model from an archive already read (Archive::load), with every load option (strict,
/// check_values, prefixes, renames); same checks and throws, messages name archive.source().
LoadedCheckpoint load_model(const Archive& archive, layers::Module& model, const layers::LoadOptions& options = {});

/// The input preprocessing as checkpoint extras: the Standardizer's state_dict() under
/// `prefix` ("preprocess.mean", "preprocess.std" float64, "preprocess.feature_shape" int64)
/// and metadata "<prefix>recipe" = "input = (x - mean) / std".
optim::CheckpointExtras standardizer_extras(const data::Standardizer& standardizer,
                                            const std::string& prefix = "preprocess.");
/// The Standardizer stored by standardizer_extras (Standardizer::from_state_dict). Throws
/// std::invalid_argument when the checkpoint lacks it, naming the missing or malformed key.
data::Standardizer read_standardizer(const LoadedCheckpoint& checkpoint, const std::string& prefix = "preprocess.");

/// `b` appended to `a` (tensors and metadata; a later metadata key wins).
optim::CheckpointExtras merge_extras(optim::CheckpointExtras a, const optim::CheckpointExtras& b);

}  // namespace tapegrad::train
