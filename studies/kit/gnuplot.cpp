#include "kit/gnuplot.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include <tapegrad/core/file_io.h>

namespace studies::kit {

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

std::vector<std::string> render_figure(const std::string& dir, const std::string& name, const std::string& script) {
  const std::filesystem::path d(dir), script_path = d / "plots" / (name + ".gp"), png = d / (name + ".png"),
                              log = d / "plots" / "gnuplot.log";
  write_file(script_path.string(), script);
  std::error_code ec;
  std::filesystem::remove(png, ec);  // a stale figure must not pass for a new one
  // In the output folder: the script's relative names need no path of dir (see the header).
  if (!wait_ok(spawn_gnuplot(dir, {"plots/" + name + ".gp"}, log.string())) || !std::filesystem::exists(png)) {
    spdlog::warn("gnuplot failed on {} (see {}); the CSV is unaffected", script_path.string(), log.string());
    return {};
  }
  return {png.string()};
}

std::string data_file(const std::string& dir, const std::string& file, const std::string& text) {
  write_file((std::filesystem::path(dir) / "plots" / file).string(), text);
  return gnuplot_quote("plots/" + file);
}

}  // namespace studies::kit
