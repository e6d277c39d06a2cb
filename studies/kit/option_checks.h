// Checks of the study CLIs' options that several studies share. Each throws
// std::invalid_argument whose message names the flag, the expected range and the value given.
#pragma once

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace studies::kit {

/// "FLAG must be >= MIN, got VALUE" unless value >= min.
void check_at_least(std::string_view flag, std::int64_t value, std::int64_t min);
/// --seeds >= 1 (check_at_least), and the seeds --seed .. --seed + --seeds - 1 within 64 bits
/// (they wrapped to 0): "--seed/--seeds: expected the last seed --seed + --seeds - 1 <=
/// 18446744073709551615, got --seed S --seeds K".
void check_seeds(std::uint64_t seed, std::int64_t seeds);
/// "FLAG: expected a finite number > 0, got VALUE" unless value is finite and > 0.
void check_rate(std::string_view flag, double value);
/// --batch: at least 2 (BatchNorm refuses a batch of 1) and at most --train-size.
void check_batch(std::int64_t batch, std::int64_t train_size);
/// FLAG: at least one width, each >= 1.
void check_widths(std::string_view flag, const std::vector<std::int64_t>& widths);

/// Runs `build` (a net's constructor); a std::bad_alloc there, parameters that do not fit in
/// memory, becomes std::runtime_error "out of memory allocating the parameters of `what`; use
/// smaller widths" (`what` names the options, e.g. "--hidden 100,100").
template <class F>
auto name_out_of_memory(const std::string& what, F&& build) -> decltype(build()) {
  try {
    return build();
  } catch (const std::bad_alloc&) {
    throw std::runtime_error("out of memory allocating the parameters of " + what + "; use smaller widths");
  }
}
/// "1,2,3".
std::string join_widths(const std::vector<std::int64_t>& widths);

/// "%.9g": enough digits to read a double's option value back.
std::string fmt9(double v);
/// "%.4g".
std::string fmt4(double v);
/// "%g".
std::string fmt_g(double v);
/// Fixed-point with `digits` decimals.
std::string fixed(double v, int digits = 2);

}  // namespace studies::kit
