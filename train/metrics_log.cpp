#include <tapegrad/train/metrics_log.h>

#include <stdexcept>

#include <tapegrad/core/file_io.h>
#include <tapegrad/train/early_stopping.h>

namespace tapegrad::train {

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

std::string history_csv(const std::vector<EpochLogs>& history) {
  std::vector<std::string> columns;
  for (const auto& e : history)
    for (const auto& [k, v] : e.values) {
      bool known = false;
      for (const auto& c : columns) known = known || c == k;
      if (!known) columns.push_back(k);
    }
  std::string out = "epoch";
  for (const auto& c : columns) out += "," + c;
  out += "\n";
  for (const auto& e : history) {
    out += std::to_string(e.epoch);
    for (const auto& c : columns) {
      out += ",";
      if (auto v = e.find(c)) out += format_double(*v);
    }
    out += "\n";
  }
  return out;
}

std::string history_json_lines(const std::vector<EpochLogs>& history) {
  std::string out;
  for (const auto& e : history) {
    const std::string arr = history_to_json({e});  // "[{...}]"
    out += arr.substr(1, arr.size() - 2) + "\n";
  }
  return out;
}

MetricsLog::MetricsLog(MetricsLogOptions options) : o_(std::move(options)), format_(o_.format) {
  if (o_.path.empty()) throw std::invalid_argument("MetricsLog: expected a path, got ''");
  if (format_ == LogFormat::Auto)
    format_ = ends_with(o_.path, ".jsonl") || ends_with(o_.path, ".json") ? LogFormat::JsonLines : LogFormat::Csv;
}

void MetricsLog::on_fit_begin(TrainState& s) {
  if (s.is_main_process()) check_output_file(o_.path);
}

void MetricsLog::after_epoch_end(TrainState& s) {
  if (!s.is_main_process()) return;
  atomic_write_file(o_.path, format_ == LogFormat::Csv ? history_csv(s.history) : history_json_lines(s.history));
}

}  // namespace tapegrad::train
