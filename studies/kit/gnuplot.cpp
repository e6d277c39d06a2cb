#include "kit/gnuplot.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include <tapegrad/core/file_io.h>

namespace report_kit {

void write_file(const std::string& path, const std::string& text) { tapegrad::atomic_write_file(path, text); }

bool write_tables(const std::string& dir, const std::string& csv, const std::string& summary) {
  const std::filesystem::path d(dir);
  std::filesystem::create_directories(d / "plots");
  write_file((d / "results.csv").string(), csv);
  write_file((d / "summary.md").string(), summary);
  if (gnuplot_available()) return true;
  spdlog::warn("gnuplot (pngcairo) not found: no figure; the CSV and summary are written");
  return false;
}

std::vector<std::string> render_figure(const std::string& script_path, const std::string& script,
                                       const std::string& png, const std::string& log_path) {
  write_file(script_path, script);
  std::error_code ec;
  std::filesystem::remove(png, ec);  // a stale figure must not pass for a new one
  if (run_gnuplot({script_path}, log_path) != 0 || !std::filesystem::exists(png)) {
    spdlog::warn("gnuplot failed on {} (see {}); the CSV is unaffected", script_path, log_path);
    return {};
  }
  return {png};
}

}  // namespace report_kit
