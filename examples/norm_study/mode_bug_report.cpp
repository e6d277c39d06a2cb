// norm_study mode-bugs: CSV, Markdown summary and figure.
#include <cmath>
#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>

#include "gnuplot.h"
#include "mode_bug_study.h"

namespace normstudy {

namespace fs = std::filesystem;

namespace {
std::string csv_field(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
}  // namespace

std::string mode_bugs_csv(const BugResult& r) {
  std::string out = "bug,correct,buggy,correct_accuracy,buggy_accuracy,detector,fires,quiet_on_correct\n";
  for (const auto& x : r.rows)
    out += csv_field(x.bug) + "," + csv_field(x.correct_label) + "," + csv_field(x.buggy_label) + "," +
           fmt9(x.correct_accuracy) + "," + fmt9(x.buggy_accuracy) + "," + csv_field(x.detector) + "," +
           (x.fires ? "1" : "0") + "," + (x.quiet_on_correct ? "1" : "0") + "\n";
  return out;
}

std::string mode_bugs_summary(const BugResult& r) {
  const auto& o = r.options;
  std::ostringstream md;
  md << "# norm_study mode-bugs: summary\n\n";
  md << "- BatchNorm MLP 784";
  for (auto h : o.hidden) md << "-" << h;
  md << "-10, Fashion-MNIST " << o.train_size << " training images, test set " << (o.test_size > 0 ? o.test_size : 10000)
     << "; SGD momentum 0.9, lr " << fmt9(o.lr) << ", batch " << o.batch << ", " << o.epochs << " epochs, seed "
     << o.seed << "\n";
  md << "- correct loop (eval-mode test accuracy): " << fixed(r.baseline_accuracy) << "%; a constant predictor "
        "scores 10%\n";
  md << "- wall time " << fmt4(r.seconds) << " s with " << o.threads << " worker threads\n\n";
  md << "| bug | correct: test acc (%) | buggy: test acc (%) | Δ (points) | detector | fires | quiet on the correct "
        "variant |\n|---|---|---|---|---|---|---|\n";
  for (const auto& x : r.rows) {
    md << "| " << x.bug << " | " << x.correct_label << ": " << fixed(x.correct_accuracy) << " | " << x.buggy_label
       << (std::isnan(x.buggy_accuracy) ? std::string() : ": " + fixed(x.buggy_accuracy)) << " | "
       << (std::isnan(x.buggy_accuracy) ? std::string("—") : fixed(x.buggy_accuracy - x.correct_accuracy)) << " | "
       << x.detector << " | " << (x.fires ? "yes" : "**no**") << " | " << (x.quiet_on_correct ? "yes" : "**no**")
       << " |\n";
  }
  return md.str();
}

std::vector<std::string> write_mode_bugs(const BugResult& r, const std::string& dir_s) {
  const fs::path dir(dir_s), plots = dir / "plots";
  if (!report_kit::write_tables(dir_s, mode_bugs_csv(r), mode_bugs_summary(r))) return {};
  std::ostringstream d;
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    std::string label = r.rows[i].bug;
    if (label.size() > 42) label = label.substr(0, 40) + "…";
    for (auto& c : label)
      if (c == '"') c = '\'';
    d << i << " \"" << label << "\" " << fmt9(r.rows[i].correct_accuracy) << " "
      << (std::isnan(r.rows[i].buggy_accuracy) ? std::string("?") : fmt9(r.rows[i].buggy_accuracy)) << "\n";
  }
  const std::string f = (plots / "mode_bugs.dat").string();
  report_kit::write_file(f, d.str());
  const fs::path png = dir / "mode_bugs.png";
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1100,560 font 'sans,10'\nset output " << report_kit::gnuplot_quote(png.string())
     << "\nset datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
        "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset xtics rotate by -30 left\nset grid y\n"
        "set ylabel 'test accuracy (%)'\nset yrange [0:100]\nset key top right\nset bmargin 10\n"
        "set title 'Mode bugs on Fashion-MNIST (BatchNorm MLP, seed "
     << r.options.seed << "): correct vs buggy variant'\n"
     << "plot " << report_kit::gnuplot_quote(f) << " using 3:xtic(2) title 'correct' lc rgb '#1f77b4', '' using 4 "
        "title 'buggy' lc rgb '#d62728'\n";
  return report_kit::render_figure((plots / "mode_bugs.gp").string(), gp.str(), png.string(),
                                  (plots / "gnuplot.log").string());
}

}  // namespace normstudy
