#pragma once
// Buffer snapshots and the "what did this evaluation mutate?" check.
//
// Module::state_dict() returns the LIVE tensors, so a "before" taken with it changes
// along with the module. Take the before-state with snapshot_buffers() or
// snapshot_state() (copies), then compare it with a later snapshot or the live dict.
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/layers/module.h>
#include <tapegrad/layers/state_dict.h>

namespace tapegrad::debug {

/// Copies (clones) of every buffer of `module` and its descendants, persistent or not,
/// under their dotted names ("1.running_mean").
layers::StateDict snapshot_buffers(const layers::Module& module);
/// Copies (clones) of module.state_dict(): parameters and persistent buffers.
layers::StateDict snapshot_state(const layers::Module& module);
/// Writes the values of a snapshot back into the module's buffers of the same names
/// (no autograd). Throws std::invalid_argument naming the key when the module has no such
/// buffer or its shape differs (expected vs actual); nothing is written in that case.
void restore_buffers(layers::Module& module, const layers::StateDict& snapshot);

/// RAII: snapshot_buffers(module) at construction, restore_buffers at scope exit (also when a
/// forward throws in between). `module` must outlive the guard.
class BufferRestore {
 public:
  /// Snapshots the buffers of `module`.
  explicit BufferRestore(layers::Module& module) : module_(module), saved_(snapshot_buffers(module)) {}
  ~BufferRestore() { restore_buffers(module_, saved_); }
  BufferRestore(const BufferRestore&) = delete;
  BufferRestore& operator=(const BufferRestore&) = delete;

 private:
  layers::Module& module_;
  layers::StateDict saved_;
};

/// One entry of `before` whose value differs in `after`.
struct BufferChange {
  std::string key;                     ///< the buffer's state_dict key
  double max_abs_change = 0;           ///< max |after - before| over elements (int64 counters too)
  std::int64_t changed_elements = 0;   ///< elements with |after - before| > tol
  std::int64_t numel = 0;              ///< elements of the buffer (before)
  std::string note;                    ///< "missing after", "shape [3] -> [4]", or ""
};

/// Which entries of `before` changed in `after` (typically: snapshot_buffers(model) before
/// an evaluation, snapshot_buffers(model) or model.state_dict() after). Entries whose
/// largest change is <= tol are omitted; a key missing from `after` or whose shape changed
/// is reported with a note. Keys only in `after` are ignored. Order: the order of `before`.
/// Example: an evaluation in train mode reports "1.running_mean", "1.running_var" and
/// "1.num_batches_tracked"; a correct eval-mode evaluation reports nothing.
std::vector<BufferChange> buffers_changed(const layers::StateDict& before, const layers::StateDict& after,
                                          double tol = 0.0);

/// "1.running_mean: max |Δ| = 0.031 (128/128 changed)" per line; "no buffer changed" if empty.
std::string to_string(const std::vector<BufferChange>& changes);

}  // namespace tapegrad::debug
