#include <tapegrad/train/early_stopping.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::train {

bool improves(double value, double best, Mode mode, double min_delta) {
  if (!std::isfinite(value)) return false;
  if (std::isnan(best)) return true;
  return mode == Mode::Min ? value < best - min_delta : value > best + min_delta;
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

double parse_double(const std::string& text, const std::string& what) {
  if (text == "nan") return std::nan("");
  if (text == "inf") return HUGE_VAL;
  if (text == "-inf") return -HUGE_VAL;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw std::invalid_argument(what + ": expected a number, got '" + text + "'");
  return v;
}

int parse_count(const std::string& text, const std::string& what) {
  int v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || v < 0 || v > 1000000000)
    throw std::invalid_argument(what + ": expected a count (an integer in [0, 1e9]), got '" + text + "'");
  return v;
}

void check_best_state(double best, int best_epoch) {
  if (best_epoch == 0 && !std::isnan(best))
    throw std::invalid_argument("best: expected nan with best_epoch 0 (no epoch improved yet), got best " +
                                format_double(best));
  if (best_epoch > 0 && !std::isfinite(best))
    throw std::invalid_argument("best: expected a finite number with best_epoch " + std::to_string(best_epoch) +
                                ", got " + format_double(best));
}

namespace {
int parse_int(const std::map<std::string, std::string>& s, const std::string& key) {
  auto it = s.find(key);
  return it == s.end() ? 0 : parse_count(it->second, key);
}
}  // namespace

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : o_(std::move(options)) {
  if (!(o_.min_delta >= 0))
    throw std::invalid_argument("EarlyStopping: expected min_delta >= 0, got " + format_double(o_.min_delta));
  if (o_.patience < 0)
    throw std::invalid_argument("EarlyStopping: expected patience >= 0, got " + std::to_string(o_.patience));
  if (o_.monitor.empty()) throw std::invalid_argument("EarlyStopping: expected a monitor key, got ''");
}

void EarlyStopping::on_epoch_end(TrainState& s) {
  const EpochLogs& e = s.history.back();
  auto v = e.find(o_.monitor);
  if (!v)
    throw std::invalid_argument("EarlyStopping: monitor '" + o_.monitor + "' was not logged by epoch " +
                                std::to_string(e.epoch) + " (logged: " + e.keys() + ")");
  if (!std::isfinite(*v))  // not a value to compare: the run diverged (nothing changes here)
    throw std::runtime_error("EarlyStopping: monitor '" + o_.monitor + "' is " + format_double(*v) + " at epoch " +
                             std::to_string(e.epoch) + ", not a value to compare: the run diverged (best " +
                             format_double(best_) + " at epoch " + std::to_string(best_epoch_) + ")");
  if (improves(*v, best_, o_.mode, o_.min_delta)) {
    best_ = *v;
    best_epoch_ = e.epoch;
    wait_ = 0;
    if (o_.restore_best_weights && s.model != nullptr) {
      best_weights_.clear();
      for (const auto& [key, t] : s.model->state_dict()) best_weights_.emplace_back(key, t.clone());
      best_weights_epoch_ = e.epoch;
    }
    return;
  }
  if (++wait_ >= o_.patience) {
    stopped_epoch_ = e.epoch;
    s.stop_training = true;
    s.stop_reason = "EarlyStopping: " + o_.monitor + " did not improve for " + std::to_string(wait_) +
                    " epochs (best " + format_double(best_) + " at epoch " + std::to_string(best_epoch_) + ")";
  }
}

void EarlyStopping::on_fit_end(TrainState& s) {
  restored_epoch_ = 0;
  if (!o_.restore_best_weights || s.model == nullptr || best_weights_.empty()) return;
  if (best_weights_epoch_ == s.epoch) return;  // the model already holds the best epoch's weights
  NoGradGuard no_grad;
  const layers::StateDict live = s.model->state_dict();
  for (const auto& [key, t] : best_weights_) {
    Tensor dst = live.at(key);  // a handle on the live tensor
    dst.copy_(t);
  }
  restored_epoch_ = best_weights_epoch_;
}

std::map<std::string, std::string> EarlyStopping::state_dict() const {
  return {{"monitor", o_.monitor},
          {"best", format_double(best_)},
          {"best_epoch", std::to_string(best_epoch_)},
          {"wait", std::to_string(wait_)},
          {"stopped_epoch", std::to_string(stopped_epoch_)}};
}

void EarlyStopping::load_state_dict(const std::map<std::string, std::string>& s) {
  if (s.empty()) return;  // a checkpoint written without this callback: start fresh
  if (auto it = s.find("monitor"); it != s.end() && it->second != o_.monitor)
    throw std::invalid_argument("the checkpoint monitored '" + it->second + "', this run monitors '" + o_.monitor + "'");
  const auto b = s.find("best");
  const double best = b == s.end() ? std::nan("") : parse_double(b->second, "best");
  const int best_epoch = parse_int(s, "best_epoch"), wait = parse_int(s, "wait"), stopped = parse_int(s, "stopped_epoch");
  check_best_state(best, best_epoch);
  best_ = best;
  best_epoch_ = best_epoch;
  wait_ = wait;
  stopped_epoch_ = stopped;
}

}  // namespace tapegrad::train
