#pragma once
// gnuplot for the study CLIs (bn_experiments, norm_study, claims): tables and figures written
// through the library's shell-free gnuplot runner (tapegrad/train/gnuplot.h). Figure scripts
// run in the output folder and name files relative to it; texts go through gnuplot_text().
#include <string>
#include <vector>

#include <tapegrad/train/gnuplot.h>

namespace studies::kit {

// The runner itself is the library's (train/gnuplot.h): quoting, availability, spawning.
using tapegrad::train::gnuplot_available;
using tapegrad::train::gnuplot_quote;
using tapegrad::train::gnuplot_text;
using tapegrad::train::run_gnuplot;
using tapegrad::train::spawn_gnuplot;
using tapegrad::train::wait_ok;

/// Writes `csv` to dir/results.csv and `summary` to dir/summary.md (creating dir/plots), then
/// whether figures can be drawn: false, with one warning, when gnuplot is missing.
bool write_tables(const std::string& dir, const std::string& csv, const std::string& summary);

/// Draws one figure: writes `script` to dir/plots/<name>.gp, removes a stale dir/<name>.png
/// and runs gnuplot on "plots/<name>.gp" with `dir` as its working directory (stderr appended
/// to dir/plots/gnuplot.log). The script names its files relative to dir ("<name>.png",
/// data_file()'s "plots/…"), so no part of dir's path enters it and any folder name works
/// (a newline, quotes, `$(…)`). Returns {dir/<name>.png} when the figure was written;
/// otherwise warns (the CSV is unaffected) and returns {}.
std::vector<std::string> render_figure(const std::string& dir, const std::string& name, const std::string& script);

/// Writes `text` to dir/plots/<file> and returns that file's name for a figure script run by
/// render_figure: gnuplot_quote("plots/<file>").
std::string data_file(const std::string& dir, const std::string& file, const std::string& text);

/// Writes `text` to `path` atomically (tapegrad::atomic_write_file: a regular file or a new
/// path, never a device or a directory). Throws naming the path.
void write_file(const std::string& path, const std::string& text);

}  // namespace studies::kit
