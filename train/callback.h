#pragma once
// Callbacks: code fit() runs at fixed points of training (Keras / Lightning style), and what
// they see (TrainState). A callback that keeps state across epochs (best value, patience
// counter) saves it into the training checkpoints through state_dict(), so a resumed run
// makes the same decisions as the uninterrupted one.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/random.h>
#include <tapegrad/layers/module.h>
#include <tapegrad/optim/lr_scheduler.h>
#include <tapegrad/optim/optimizer.h>
#include <tapegrad/optim/training_checkpoint.h>
#include <tapegrad/train/data_parallel.h>
#include <tapegrad/train/evaluate.h>

namespace tapegrad::train {

/// The values of one epoch, in the order fit() wrote them:
///   "loss"                mean training loss over the epoch's rows (every rank's)
///   "val_loss"            mean validation loss (with a validation set)
///   "val_accuracy"        validation accuracy in [0, 1] (class targets, (N, C) outputs)
///   "lr"                  the learning rate of group 0 during the epoch
///   "seconds"             wall time of the training steps (validation excluded)
///   "samples_per_second"  global training rows per wall second of training steps
///   "cpu_seconds"         this process's CPU time (user + sys) in the training steps
///   "val_seconds"         wall time of the validation pass
/// Callbacks may add their own values in on_epoch_end.
struct EpochLogs {
  int epoch = 0;  ///< 1-based
  /// (key, value) pairs in the order logged ("loss", "val_loss", ...).
  std::vector<std::pair<std::string, double>> values;

  /// The value of `key`, or nullopt.
  std::optional<double> find(const std::string& key) const;
  /// The value of `key`; throws std::invalid_argument naming the key and the keys present.
  double get(const std::string& key) const;
  /// Sets `key` (replacing an earlier value, else appended).
  void set(const std::string& key, double value);
  /// "loss, val_loss, ..." (for error messages).
  std::string keys() const;
};

/// The history as a JSON array of {"epoch": n, "<key>": value, ...} objects (doubles written
/// round-trip exact), and back. history_from_json throws std::invalid_argument for malformed text.
std::string history_to_json(const std::vector<EpochLogs>& history);
/// Parses history_to_json()'s text back.
std::vector<EpochLogs> history_from_json(const std::string& json);

class Callback;

/// What callbacks see and may change during fit().
struct TrainState {
  /// The model being trained.
  layers::Module* model = nullptr;
  /// The optimizer stepping it.
  optim::Optimizer* optimizer = nullptr;
  optim::LRScheduler* scheduler = nullptr;  ///< null without a scheduler
  Generator* generator = nullptr;           ///< the run's generator (shuffles, dropout), or null
  DataParallel* parallel = nullptr;         ///< null: one process
  int epoch = 0;                            ///< the current (1-based) or last finished epoch
  int epochs = 0;                           ///< the run's total (FitOptions::epochs)
  std::int64_t batch = 0;                   ///< batches done in this epoch
  std::int64_t batches = 0;                 ///< batches per epoch
  double running_loss = 0;                  ///< mean loss over this epoch's rows so far (this rank)
  std::int64_t samples_seen = 0;            ///< global rows trained on in this epoch so far
  std::vector<EpochLogs> history;           ///< every finished epoch, restored ones included
  std::optional<Evaluation> last_validation;  ///< the last validation pass (confusion matrix...)
  /// Set by a callback (e.g. EarlyStopping) to end training after this epoch.
  bool stop_training = false;
  /// Why stop_training was set (printed and logged), e.g. EarlyStopping's message.
  std::string stop_reason;

  /// Rank 0 (or the only process): the one that writes files and prints.
  bool is_main_process() const { return !parallel || parallel->rank() == 0; }
  /// The extras every training checkpoint carries: FitOptions::checkpoint_extras (e.g. the
  /// input preprocessing) plus the history and each callback's state (see fit.h). Set by fit().
  optim::CheckpointExtras checkpoint_extras() const;

  // ---- set by fit(), used by checkpoint_extras() ----
  /// FitOptions::checkpoint_extras (set by fit()).
  const optim::CheckpointExtras* user_extras = nullptr;
  /// The run's callbacks, whose states checkpoint_extras() collects (set by fit()).
  const std::vector<std::shared_ptr<Callback>>* callbacks = nullptr;
};

/// Base class: every hook does nothing by default. Hooks run on every rank of a data-parallel
/// run (files are written by the main process only; see TrainState::is_main_process).
class Callback {
 public:
  virtual ~Callback() = default;
  /// A short type name ("EarlyStopping"); its state is saved under "callback.<name>." (see
  /// callback_state_names). No '.' or ','.
  virtual std::string name() const = 0;
  /// Before the first epoch of this call (after a resume restored the state).
  virtual void on_fit_begin(TrainState&) {}
  /// Before each epoch's first batch (state.epoch is the new epoch).
  virtual void on_epoch_begin(TrainState&) {}
  /// After each optimizer step (state.batch, running_loss, samples_seen updated).
  virtual void on_batch_end(TrainState&) {}
  /// After validation and the scheduler step; state.history.back() holds the epoch's logs.
  /// Decisions go here (e.g. EarlyStopping sets stop_training).
  virtual void on_epoch_end(TrainState&) {}
  /// After every callback's on_epoch_end: for writing files that must see every callback's
  /// updated state (checkpoints, logs).
  virtual void after_epoch_end(TrainState&) {}
  /// After the last epoch of this call (also after an early stop).
  virtual void on_fit_end(TrainState&) {}
  /// State kept across epochs, as strings (round-trip exact), saved in every training checkpoint.
  virtual std::map<std::string, std::string> state_dict() const { return {}; }
  /// Restores state_dict() on resume. Throws std::invalid_argument for a malformed value.
  virtual void load_state_dict(const std::map<std::string, std::string>&) {}
};

/// How fit() takes callbacks.
using CallbackPtr = std::shared_ptr<Callback>;

/// The names under which checkpoints keep the callbacks' states, in the callbacks' order: each
/// callback's name(), the second and later of one name suffixed "#2", "#3", ... (so a resumed
/// run matches states by name, whatever callbacks were added or reordered). Null callbacks are
/// not allowed (fit() refuses them first).
std::vector<std::string> callback_state_names(const std::vector<CallbackPtr>& callbacks);

/// Whether a monitored value improved: mode "min" (lower is better) or "max".
enum class Mode { Min, Max };
/// "min" or "max"; throws std::invalid_argument naming the value otherwise.
Mode parse_mode(const std::string& text);

/// Runs a function at the end of each epoch (e.g. a custom log line).
class LambdaCallback : public Callback {
 public:
  /// Calls `on_epoch_end(state)` in on_epoch_end (an empty function does nothing).
  explicit LambdaCallback(std::function<void(TrainState&)> on_epoch_end) : fn_(std::move(on_epoch_end)) {}
  std::string name() const override { return "LambdaCallback"; }
  void on_epoch_end(TrainState& s) override {
    if (fn_) fn_(s);
  }

 private:
  std::function<void(TrainState&)> fn_;
};

}  // namespace tapegrad::train
