#include "kit/option_checks.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace studies::kit {

namespace {
std::string printf_double(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
}  // namespace

void check_at_least(std::string_view flag, std::int64_t value, std::int64_t min) {
  if (value < min)
    throw std::invalid_argument(std::string(flag) + " must be >= " + std::to_string(min) + ", got " +
                                std::to_string(value));
}

void check_seeds(std::uint64_t seed, std::int64_t seeds) {
  check_at_least("--seeds", seeds, 1);
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  if (static_cast<std::uint64_t>(seeds - 1) > kMax - seed)
    throw std::invalid_argument("--seed/--seeds: expected the last seed --seed + --seeds - 1 <= " +
                                std::to_string(kMax) + ", got --seed " + std::to_string(seed) + " --seeds " +
                                std::to_string(seeds));
}

void check_rate(std::string_view flag, double value) {
  if (!(std::isfinite(value) && value > 0))
    throw std::invalid_argument(std::string(flag) + ": expected a finite number > 0, got " + fmt9(value));
}

void check_batch(std::int64_t batch, std::int64_t train_size) {
  if (train_size < 1) throw std::invalid_argument("--train-size: expected >= 1, got " + std::to_string(train_size));
  if (batch < 2)
    throw std::invalid_argument("--batch: expected >= 2 (BatchNorm refuses 1), got " + std::to_string(batch));
  if (batch > train_size)
    throw std::invalid_argument("--batch " + std::to_string(batch) + " exceeds --train-size " +
                                std::to_string(train_size));
}

void check_widths(std::string_view flag, const std::vector<std::int64_t>& widths) {
  if (widths.empty()) throw std::invalid_argument(std::string(flag) + ": expected at least one width, got none");
  for (auto w : widths)
    if (w < 1) throw std::invalid_argument(std::string(flag) + ": expected widths >= 1, got " + std::to_string(w));
}

std::string join_widths(const std::vector<std::int64_t>& widths) {
  std::string out;
  for (auto w : widths) {
    if (!out.empty()) out += ',';
    out += std::to_string(w);
  }
  return out;
}

std::string fmt9(double v) { return printf_double("%.9g", v); }
std::string fmt4(double v) { return printf_double("%.4g", v); }
std::string fmt_g(double v) { return printf_double("%g", v); }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace studies::kit
