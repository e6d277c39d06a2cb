#pragma once
// MetricsLog: the run's history as a CSV table or JSON lines, rewritten (atomically) after
// every epoch by the main process, so the file always holds every finished epoch, restored
// ones included after a resume.
//   CSV:         epoch,loss,val_loss,val_accuracy,lr,...  (columns in order of first appearance;
//                an epoch without a value leaves its cell empty; numbers "%.17g")
//   JSON lines:  {"epoch":1,"loss":0.52,...} per line (NaN and infinities as "nan", "inf")
#include <string>
#include <vector>

#include <tapegrad/train/callback.h>

namespace tapegrad::train {

/// File format of MetricsLog: Auto chooses by the path's extension.
enum class LogFormat { Auto, Csv, JsonLines };

/// Where MetricsLog writes and in which format.
struct MetricsLogOptions {
  std::string path;  ///< the file, rewritten after every epoch
  /// Auto: JSON lines for a path ending in .jsonl or .json, CSV otherwise.
  LogFormat format = LogFormat::Auto;
};

/// Callback writing the run's history as CSV or JSON lines after every epoch (see the top
/// of this header).
class MetricsLog : public Callback {
 public:
  /// Throws std::invalid_argument for an empty path.
  explicit MetricsLog(MetricsLogOptions options);
  std::string name() const override { return "MetricsLog"; }
  /// Checks the path (core/file_io.h check_output_file): std::runtime_error naming it.
  void on_fit_begin(TrainState& s) override;
  void after_epoch_end(TrainState& s) override;
  /// The format in use (Auto resolved by the path).
  LogFormat format() const { return format_; }

 private:
  MetricsLogOptions o_;
  LogFormat format_;
};

/// The history as CSV text, and as JSON lines (see above).
std::string history_csv(const std::vector<EpochLogs>& history);
/// One JSON object per epoch and line.
std::string history_json_lines(const std::vector<EpochLogs>& history);

}  // namespace tapegrad::train
