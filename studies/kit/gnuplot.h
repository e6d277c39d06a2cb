#pragma once
// gnuplot for the study CLIs (bn_experiments, norm_study): tables and figures written through
// the library's shell-free gnuplot runner (tapegrad/train/gnuplot.h).
#include <string>
#include <vector>

#include <tapegrad/train/gnuplot.h>

namespace report_kit {

// The runner itself is the library's (train/gnuplot.h): quoting, availability, spawning.
using tapegrad::train::gnuplot_available;
using tapegrad::train::gnuplot_quote;
using tapegrad::train::run_gnuplot;
using tapegrad::train::spawn_gnuplot;
using tapegrad::train::wait_ok;

/// Writes `csv` to dir/results.csv and `summary` to dir/summary.md (creating dir/plots), then
/// whether figures can be drawn: false, with one warning, when gnuplot is missing.
bool write_tables(const std::string& dir, const std::string& csv, const std::string& summary);

/// Writes `script` to `script_path`, removes a stale `png`, runs gnuplot on it (stderr to
/// `log_path`) and returns {png} when the figure was written; otherwise warns (the CSV is
/// unaffected) and returns {}.
std::vector<std::string> render_figure(const std::string& script_path, const std::string& script,
                                       const std::string& png, const std::string& log_path);

/// Writes `text` to `path` atomically (tapegrad::atomic_write_file: a regular file or a new
/// path, never a device or a directory). Throws naming the path.
void write_file(const std::string& path, const std::string& text);

}  // namespace report_kit
