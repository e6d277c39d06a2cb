#pragma once
// ProgressBar: a one-line bar per epoch on a terminal (batches done, running loss, samples/s,
// ETA), and one summary line per epoch ("epoch 3/20: loss 0.4123, val_loss 0.3981,
// val_accuracy 0.8612, lr 0.001 (4.1 s)"). When the stream is not a terminal (a log file, a
// pipe, CI) only the summary lines are written. Only the main process prints.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <tapegrad/train/callback.h>

namespace tapegrad::train {

/// Where and what ProgressBar prints.
struct ProgressBarOptions {
  std::FILE* stream = stderr;  ///< where to print; not null
  /// Draw the bar (ignored when `stream` is not a terminal).
  bool bar = true;
  /// Write the summary line at the end of each epoch.
  bool epoch_lines = true;
  /// The values the summary line shows, when logged (in this order).
  std::vector<std::string> keys = {"loss", "val_loss", "val_accuracy", "lr"};
  int width = 30;            ///< characters of the bar
  double min_interval = 0.1; ///< seconds between redraws
};

/// Callback printing a per-epoch progress bar on a terminal and a summary line per epoch
/// (see the top of this header).
class ProgressBar : public Callback {
 public:
  /// Throws std::invalid_argument for a null stream or width < 1.
  explicit ProgressBar(ProgressBarOptions options = {});
  std::string name() const override { return "ProgressBar"; }
  void on_epoch_begin(TrainState& s) override;
  void on_batch_end(TrainState& s) override;
  void on_epoch_end(TrainState& s) override;

  /// The summary line of an epoch (without newline), as written.
  std::string epoch_line(const TrainState& s) const;
  /// Whether the bar is drawn on this stream (a terminal and options.bar).
  bool drawing() const { return drawing_; }

 private:
  ProgressBarOptions o_;
  bool drawing_;
  std::chrono::steady_clock::time_point start_;
  double last_ = -1;
};

}  // namespace tapegrad::train
