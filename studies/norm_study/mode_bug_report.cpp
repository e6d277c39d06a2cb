// norm_study mode-bugs: CSV, Markdown summary and figure.
#include <cmath>
#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>

#include "kit/gnuplot.h"
#include "mode_bug_study.h"
#include "kit/stats.h"
#include "kit/training_options.h"

namespace normstudy {

namespace fs = std::filesystem;

namespace {
std::string csv_field(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
}  // namespace

namespace {
// Mean ± sample std of per-seed values; "—" when a value is NaN (a refused variant).
studies::kit::MeanStd stats_of(const std::vector<double>& v) {
  for (double x : v)
    if (std::isnan(x)) return {};
  return studies::kit::mean_std(v);
}
std::vector<double> diff(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) d.push_back(a[i] - b[i]);
  return d;
}
std::string pm(const studies::kit::MeanStd& m, bool sign = false) {
  return studies::kit::fmt_mean_std(m, {1, 2, studies::kit::Notation::Fixed, sign});
}
}  // namespace

std::string mode_bugs_csv(const BugResult& r) {
  std::string out = "seed,bug,correct,buggy,correct_accuracy,buggy_accuracy,detector,fires,quiet_on_correct\n";
  for (std::size_t s = 0; s < r.baseline_by_seed.size(); ++s)
    for (const auto& x : r.rows)
      out += std::to_string(r.options.seed + s) + "," + csv_field(x.bug) + "," + csv_field(x.correct_label) + "," +
             csv_field(x.buggy_label) + "," + fmt9(x.correct_by_seed.at(s)) + "," + fmt9(x.buggy_by_seed.at(s)) +
             "," + csv_field(s == 0 ? x.detector : "") + "," + (s == 0 ? (x.fires ? "1" : "0") : "") + "," +
             (s == 0 ? (x.quiet_on_correct ? "1" : "0") : "") + "\n";
  return out;
}

std::string mode_bugs_summary(const BugResult& r) {
  const auto& o = r.options;
  const int n = static_cast<int>(r.baseline_by_seed.size());
  std::ostringstream md;
  md << "# norm_study mode-bugs: summary\n\n";
  md << "- BatchNorm MLP " << studies::kit::mlp_layers(o.hidden)
     << ", Fashion-MNIST " << o.train_size << " training images, test set " << (o.test_size > 0 ? o.test_size : 10000)
     << "; SGD momentum 0.9, lr " << fmt9(o.lr) << ", batch " << o.batch << ", " << o.epochs << " epochs, seeds "
     << o.seed << ".." << o.seed + static_cast<std::uint64_t>(n) - 1 << "\n";
  md << "- correct loop (eval-mode test accuracy): " << pm(stats_of(r.baseline_by_seed))
     << "% (mean ± sample std over seeds); a constant predictor scores 10%\n";
  md << "- accuracies mean ± std over the " << n << " seeds, Δ = buggy − correct paired by seed; labels and detector "
        "readings are seed " << o.seed << "'s; fires / quiet: on how many seeds\n";
  md << "- wall time " << fmt4(r.seconds) << " s with " << o.threads << " worker threads\n\n";
  md << "| bug | correct: test acc (%) | buggy: test acc (%) | Δ (points) | detector (seed " << o.seed
     << ") | fires | quiet on the correct variant |\n|---|---|---|---|---|---|---|\n";
  auto count = [&](int k) { return (k == n ? std::string() : std::string("**")) + std::to_string(k) + "/" +
                                   std::to_string(n) + (k == n ? std::string() : std::string("**")); };
  for (const auto& x : r.rows) {
    const auto buggy = stats_of(x.buggy_by_seed);
    md << "| " << x.bug << " | " << x.correct_label << ": " << pm(stats_of(x.correct_by_seed)) << " | "
       << x.buggy_label << (buggy.n == 0 ? std::string() : ": " + pm(buggy)) << " | "
       << (buggy.n == 0 ? std::string("—") : pm(stats_of(diff(x.buggy_by_seed, x.correct_by_seed)), true)) << " | "
       << x.detector << " | " << count(x.fires_seeds) << " | " << count(x.quiet_seeds) << " |\n";
  }
  return md.str();
}

std::vector<std::string> write_mode_bugs(const BugResult& r, const std::string& dir_s) {
  if (!studies::kit::write_tables(dir_s, mode_bugs_csv(r), mode_bugs_summary(r))) return {};
  std::ostringstream d;
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    std::string label = r.rows[i].bug;
    if (label.size() > 42) label = label.substr(0, 40) + "…";
    for (auto& c : label)
      if (c == '"') c = '\'';
    const auto c = stats_of(r.rows[i].correct_by_seed), b = stats_of(r.rows[i].buggy_by_seed);
    d << i << " \"" << label << "\" " << fmt9(c.mean) << " " << (b.n == 0 ? std::string("?") : fmt9(b.mean)) << "\n";
  }
  const std::string f = studies::kit::data_file(dir_s, "mode_bugs.dat", d.str());
  std::ostringstream gp;
  // The bug names are tic labels read from the data: noenhanced shows them as written.
  gp << "set terminal pngcairo size 1100,560 font 'sans,10'\nset output 'mode_bugs.png'\n"
        "set datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
        "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset xtics rotate by -30 left noenhanced\nset grid y\n"
        "set ylabel 'test accuracy (%)'\nset yrange [0:100]\nset key top right\nset bmargin 10\nset title "
     << studies::kit::gnuplot_text("Mode bugs on Fashion-MNIST (BatchNorm MLP, mean of " +
                                 std::to_string(r.baseline_by_seed.size()) + " seeds): correct vs buggy variant")
     << "\nplot " << f << " using 3:xtic(2) title 'correct' lc rgb '#1f77b4', '' using 4 "
        "title 'buggy' lc rgb '#d62728'\n";
  return studies::kit::render_figure(dir_s, "mode_bugs", gp.str());
}

}  // namespace normstudy
