#include <tapegrad/train/progress_bar.h>

#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace tapegrad::train {

ProgressBar::ProgressBar(ProgressBarOptions options)
    : o_(std::move(options)), drawing_(o_.bar && o_.stream && ::isatty(::fileno(o_.stream))) {
  if (!o_.stream) throw std::invalid_argument("ProgressBar: expected a stream, got null");
  if (o_.width < 1) throw std::invalid_argument("ProgressBar: expected width >= 1, got " + std::to_string(o_.width));
}

void ProgressBar::on_epoch_begin(TrainState&) {
  start_ = std::chrono::steady_clock::now();
  last_ = -1;
}

void ProgressBar::on_batch_end(TrainState& s) {
  if (!drawing_ || !s.is_main_process()) return;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (s.batch != s.batches && secs - last_ < o_.min_interval) return;
  last_ = secs;
  const int filled = static_cast<int>(o_.width * s.batch / std::max<std::int64_t>(s.batches, 1));
  const double rate = secs > 0 ? static_cast<double>(s.samples_seen) / secs : 0.0;
  const double eta =
      s.batch > 0 ? secs * static_cast<double>(s.batches - s.batch) / static_cast<double>(s.batch) : 0.0;
  std::fprintf(o_.stream, "\repoch %d/%d [%s%s] %lld/%lld loss %.4f %.0f samples/s ETA %.0fs   ", s.epoch, s.epochs,
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(o_.width - filled), '.').c_str(), static_cast<long long>(s.batch),
               static_cast<long long>(s.batches), s.running_loss, rate, eta);
  std::fflush(o_.stream);
}

std::string ProgressBar::epoch_line(const TrainState& s) const {
  if (s.history.empty()) return "";
  const EpochLogs& e = s.history.back();
  std::string line = "epoch " + std::to_string(e.epoch) + "/" + std::to_string(s.epochs) + ":";
  char buf[64];
  bool first = true;
  for (const auto& k : o_.keys)
    if (auto v = e.find(k)) {
      std::snprintf(buf, sizeof buf, "%s %s %.4g", first ? "" : ",", k.c_str(), *v);
      line += buf;
      first = false;
    }
  if (auto secs = e.find("seconds")) {
    std::snprintf(buf, sizeof buf, " (%.1f s)", *secs);
    line += buf;
  }
  return line;
}

void ProgressBar::on_epoch_end(TrainState& s) {
  if (!s.is_main_process()) return;
  if (drawing_) std::fprintf(o_.stream, "\r%*s\r", o_.width + 80, "");
  if (o_.epoch_lines) std::fprintf(o_.stream, "%s\n", epoch_line(s).c_str());
  std::fflush(o_.stream);
}

}  // namespace tapegrad::train
