#pragma once
// mode_report: what mode every module of a model is in, what it holds, and whether its
// running statistics were ever updated. The first thing to print when a model behaves
// differently at evaluation than in training.
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/layers/module.h>

namespace tapegrad::debug {

/// A parameter or buffer: its own (non-dotted) name, shape and dtype.
struct TensorEntry {
  /// Own name ("weight", "running_mean").
  std::string name;
  /// Its shape.
  Shape shape;
  /// Its dtype.
  Dtype dtype = Dtype::Float32;
};

/// One module of the tree.
struct ModuleMode {
  std::string path;  ///< dotted path from the root ("" for the root itself, "1", "block.0")
  std::string type;  ///< type_name(), e.g. "BatchNorm1d"
  /// The module's mode: true in train mode.
  bool training = true;
  std::vector<TensorEntry> parameters;  ///< this module's own, not its children's
  std::vector<TensorEntry> buffers;     ///< this module's own buffers, persistent or not
  /// The module has running_mean / running_var buffers (BatchNorm with track_running_stats).
  bool has_running_stats = false;
  /// num_batches_tracked > 0, or running_mean != 0 anywhere, or running_var != 1 anywhere
  /// (the PyTorch init values). False means: never trained in train mode, or restored from
  /// a checkpoint saved without buffers.
  bool stats_updated = false;
  std::int64_t num_batches_tracked = -1;  ///< -1 when the module has no such buffer
};

/// The train/eval mode and state of every module of a model, as mode_report() found it.
struct ModeReport {
  std::vector<ModuleMode> modules;  ///< depth-first, root first (Module::named_modules order)
  /// true when every module is in train mode.
  bool all_training() const;
  /// true when every module is in eval mode.
  bool all_eval() const;
  /// Paths of the modules in train mode (training = true) or in eval mode (false).
  std::vector<std::string> modules_in_mode(bool training) const;
  /// Paths of modules with running statistics that were never updated.
  std::vector<std::string> never_updated() const;
  /// One line per module:
  ///   "1  BatchNorm1d  eval   params: weight [128], bias [128]  buffers: running_mean [128], ...
  ///    stats: updated (num_batches_tracked = 42)"
  /// followed by a summary line ("mixed modes: 3 train, 2 eval" when modes differ).
  std::string to_string() const;
};

/// Walks `model` and its descendants (the tree is not modified).
ModeReport mode_report(layers::Module& model);

}  // namespace tapegrad::debug
