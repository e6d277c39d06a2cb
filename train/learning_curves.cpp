#include <tapegrad/train/learning_curves.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/file_io.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/gnuplot.h>

namespace tapegrad::train {

LearningCurves::LearningCurves(LearningCurvesOptions options) : o_(std::move(options)) {
  if (o_.path.empty()) throw std::invalid_argument("LearningCurves: expected a PNG path, got ''");
  if (o_.panels.empty()) throw std::invalid_argument("LearningCurves: expected at least one panel, got none");
  if (o_.width < 100 || o_.height < 100)
    throw std::invalid_argument("LearningCurves: expected width and height >= 100 pixels, got " +
                                std::to_string(o_.width) + " x " + std::to_string(o_.height));
  gnuplot_quote(o_.path);  // throws for what a gnuplot string cannot hold
  gnuplot_text(o_.title);
  for (const auto& p : o_.panels)
    for (const auto& k : p) gnuplot_text(k);
}

void LearningCurves::on_fit_begin(TrainState& s) {
  if (!s.is_main_process()) return;
  check_output_file(o_.path);
  check_output_file(o_.path + ".gp");
}

std::string LearningCurves::script(const std::vector<EpochLogs>& history) const {
  // The panels that have data, each with the keys that were logged.
  std::vector<std::vector<std::string>> panels;
  for (const auto& p : o_.panels) {
    std::vector<std::string> keys;
    for (const auto& k : p) {
      bool logged = false;
      for (const auto& e : history) logged = logged || e.find(k).has_value();
      if (logged) keys.push_back(k);
    }
    if (!keys.empty()) panels.push_back(keys);
  }
  std::ostringstream gp;
  gp << "set terminal pngcairo size " << o_.width << "," << o_.height << " font 'sans,10'\n";
  gp << "set output " << gnuplot_quote(o_.path) << "\n";
  gp << "set datafile missing 'NaN'\n";
  // One inline data block per key: epoch value (NaN where the epoch did not log it).
  for (std::size_t p = 0; p < panels.size(); ++p)
    for (std::size_t k = 0; k < panels[p].size(); ++k) {
      gp << "$d" << p << "_" << k << " << EOD\n";
      for (const auto& e : history) {
        auto v = e.find(panels[p][k]);
        gp << e.epoch << " " << (v && std::isfinite(*v) ? format_double(*v) : "NaN") << "\n";
      }
      gp << "EOD\n";
    }
  gp << "set multiplot layout 1," << std::max<std::size_t>(panels.size(), 1);
  if (!o_.title.empty()) gp << " title " << gnuplot_text(o_.title);
  gp << "\nset grid\nset xlabel 'epoch'\nset key top right\n";
  if (history.size() == 1) gp << "set xrange [0.5:1.5]\n";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    gp << "plot ";
    for (std::size_t k = 0; k < panels[p].size(); ++k)
      gp << (k ? ", " : "") << "$d" << p << "_" << k << " using 1:2 with linespoints lw 2 pt 7 ps 0.6 title "
         << gnuplot_text(panels[p][k]);
    gp << "\n";
  }
  if (panels.empty()) gp << "set title 'nothing logged'\nplot [0:1] NaN notitle\n";
  gp << "unset multiplot\n";
  return gp.str();
}

void LearningCurves::on_fit_end(TrainState& s) {
  written_ = false;
  if (!s.is_main_process() || s.history.empty()) return;
  if (!gnuplot_available()) {
    std::fprintf(stderr, "LearningCurves: gnuplot (pngcairo) not found, no figure %s (apt-get install gnuplot)\n",
                 o_.path.c_str());
    return;
  }
  const std::string script_path = o_.path + ".gp";
  try {
    atomic_write_file(script_path, script(s.history));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "LearningCurves: %s; no figure\n", e.what());
    return;
  }
  std::error_code ec;
  std::filesystem::remove(o_.path, ec);  // a stale figure must not pass for a new one
  written_ = run_gnuplot({script_path}, "") == 0 && std::filesystem::exists(o_.path);
  if (!written_)
    std::fprintf(stderr, "LearningCurves: gnuplot failed on %s; no figure %s\n", script_path.c_str(), o_.path.c_str());
}

}  // namespace tapegrad::train
