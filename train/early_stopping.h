#pragma once
// EarlyStopping: ends training when a monitored value has stopped improving (PyTorch
// Lightning's EarlyStopping: same options and defaults).
//
// After each epoch the value of `monitor` is compared with the best so far: it improves when
//   mode min:  value < best - min_delta        mode max:  value > best + min_delta
// The first epoch always improves. After `patience` epochs in a row without improvement,
// training stops (TrainState::stop_training). A NaN or infinite value is not a value to
// compare: on_epoch_end throws std::runtime_error naming the monitor and the epoch. The best
// value, its epoch and the wait counter are saved in training checkpoints: a resumed run
// stops where the uninterrupted one would.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/core/tensor.h>

#include <tapegrad/train/callback.h>

namespace tapegrad::train {

/// What EarlyStopping watches and how patient it is (Lightning's defaults, monitor val_loss).
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";  ///< a key of EpochLogs (needs a validation set for val_*)
  Mode mode = Mode::Min;   ///< Min: lower is better (losses); Max: higher (accuracies)
  double min_delta = 0.0;  ///< >= 0; the margin an improvement must exceed
  int patience = 3;        ///< >= 0; epochs without improvement before stopping
  /// Keras' restore_best_weights: keep a copy of the model's state_dict (parameters and
  /// persistent buffers) at every improvement and copy it back into the model when fit()
  /// ends (after an early stop or the last epoch), so the model is the best epoch's, not the
  /// last one's. The copy lives in memory only: after a resume it covers the epochs of this
  /// fit() call (an earlier best stays in ModelCheckpoint's best file). Default false.
  bool restore_best_weights = false;
};

/// Callback that stops training when the monitored value stops improving (see the top of
/// this header); its state travels in training checkpoints.
class EarlyStopping : public Callback {
 public:
  /// Throws std::invalid_argument for min_delta < 0 (or NaN), patience < 0 or an empty monitor.
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  std::string name() const override { return "EarlyStopping"; }
  /// Throws std::invalid_argument naming the monitor and the logged keys when the epoch did
  /// not log it, std::runtime_error when it logged NaN or an infinity (the state is unchanged).
  void on_epoch_end(TrainState& s) override;
  /// With restore_best_weights: copies the best epoch's weights back into the model.
  void on_fit_end(TrainState& s) override;
  std::map<std::string, std::string> state_dict() const override;
  void load_state_dict(const std::map<std::string, std::string>& state) override;

  double best() const { return best_; }     ///< NaN before the first epoch
  int best_epoch() const { return best_epoch_; }  ///< epoch of best(); 0 before the first
  int wait() const { return wait_; }        ///< epochs since the last improvement
  int stopped_epoch() const { return stopped_epoch_; }  ///< 0: not stopped
  /// With restore_best_weights: the epoch whose weights on_fit_end copied back (0: none, e.g.
  /// the best epoch predates a resume, or the last epoch was the best).
  int restored_epoch() const { return restored_epoch_; }

 private:
  EarlyStoppingOptions o_;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int best_epoch_ = 0, wait_ = 0, stopped_epoch_ = 0, restored_epoch_ = 0;
  std::vector<std::pair<std::string, Tensor>> best_weights_;  // restore_best_weights' copy
  int best_weights_epoch_ = 0;
};

/// Whether `value` improves on `best` (NaN best: anything finite improves).
bool improves(double value, double best, Mode mode, double min_delta = 0.0);

/// A double as text that reads back to the same bits ("%.17g"; "nan", "inf", "-inf"), and back.
/// parse_double throws std::invalid_argument naming `what` and the text.
std::string format_double(double v);
/// Reads format_double()'s text back.
double parse_double(const std::string& text, const std::string& what);
/// A count or an epoch of a callback's state: the whole `text` as a decimal integer in
/// [0, 1e9] (no sign, spaces, fraction or exponent: "16.9", "1e3", " 5" are refused). Throws
/// std::invalid_argument naming `what` and the text.
int parse_count(const std::string& text, const std::string& what);
/// Checks a loaded (best, best_epoch) pair of a callback's state: best_epoch 0 with best NaN
/// (no epoch improved yet), or best_epoch >= 1 with a finite best (improves() takes finite
/// values only). Throws std::invalid_argument naming both keys and their values.
void check_best_state(double best, int best_epoch);

}  // namespace tapegrad::train
