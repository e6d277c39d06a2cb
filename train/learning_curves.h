#pragma once
// LearningCurves: a PNG of the run's curves at the end of fit(), drawn by gnuplot (pngcairo)
// through train/gnuplot.h (no shell). One panel per group of keys, epochs on the x axis;
// by default the losses (loss, val_loss) left and val_accuracy right. The gnuplot script
// (data inline) is kept beside the PNG as <png>.gp. Without gnuplot, or when it fails, no
// figure is drawn, one warning line goes to stderr and training is unaffected (written()
// tells). Only the main process draws.
#include <string>
#include <vector>

#include <tapegrad/train/callback.h>

namespace tapegrad::train {

/// Where LearningCurves draws, which keys and how large.
struct LearningCurvesOptions {
  std::string path;  ///< the PNG
  /// Panels (left to right), each the keys it plots; keys that were not logged are skipped,
  /// and a panel with none of its keys is left out.
  std::vector<std::vector<std::string>> panels = {{"loss", "val_loss"}, {"val_accuracy"}};
  ///@{
  /// Image size in pixels (default 1000 × 420).
  int width = 1000, height = 420;
  ///@}
  std::string title;               ///< above the panels (empty: none)
};

/// Callback drawing the run's learning curves into a PNG at the end of fit() (see the top
/// of this header).
class LearningCurves : public Callback {
 public:
  /// Throws std::invalid_argument for an empty path or no panels, for a path that a gnuplot
  /// string cannot hold (a newline), and for a title or key holding a carriage return or NUL.
  /// Title and keys are shown as written (gnuplot_text: "val_loss" is not a subscript).
  explicit LearningCurves(LearningCurvesOptions options);
  std::string name() const override { return "LearningCurves"; }
  /// Checks the PNG and script paths (check_output_file): std::runtime_error naming them.
  void on_fit_begin(TrainState& s) override;
  void on_fit_end(TrainState& s) override;
  /// Whether the last on_fit_end wrote the PNG.
  bool written() const { return written_; }
  /// The gnuplot script for `history` (what on_fit_end runs).
  std::string script(const std::vector<EpochLogs>& history) const;

 private:
  LearningCurvesOptions o_;
  bool written_ = false;
};

}  // namespace tapegrad::train
