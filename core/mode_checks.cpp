#include <tapegrad/core/mode_checks.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>

#include <tapegrad/core/warnings.h>

namespace tapegrad {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_mode{kUnset};  // kUnset: not read from the environment yet
thread_local int t_override = kUnset;

struct Issues {
  std::mutex mu;
  std::map<std::string, std::int64_t> counts;
  std::set<std::string> warned;
};

Issues& issues() {
  static Issues s;
  return s;
}

std::atomic<bool> g_pending{false};  // a bn_train_no_backward error waits to be thrown
std::mutex g_pending_mu;
std::string g_pending_message;

// Under Throw, an error still pending when the program ends (no tracked forward came after
// the freed graph to raise it) fails the process instead of vanishing: runs at exit.
void fail_on_pending_at_exit() {
  if (!g_pending.load(std::memory_order_acquire)) return;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    message = g_pending_message;
  }
  std::fflush(nullptr);
  std::fprintf(stderr,
               "[tapegrad] mode check (TAPEGRAD_MODE_CHECKS=throw) pending when the program ended, exit status "
               "%d: %s\n",
               kPendingExitStatus, message.c_str());
  std::fflush(stderr);
  std::_Exit(kPendingExitStatus);
}

}  // namespace

ModeChecks parse_mode_checks(const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "0" || v == "off") return ModeChecks::Off;
  if (v == "1" || v == "warn") return ModeChecks::Warn;
  if (v == "throw") return ModeChecks::Throw;
  throw std::invalid_argument("mode checks: expected 0, off, 1, warn or throw, got '" + value + "'");
}

ModeChecks mode_checks_from_environment() {
  const char* env = std::getenv("TAPEGRAD_MODE_CHECKS");
  if (!env || !*env) return ModeChecks::Warn;
  try {
    return parse_mode_checks(env);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string("TAPEGRAD_MODE_CHECKS: expected 0, off, 1, warn or throw, got '") + env +
                                "' (unset it for the default, warn)");
  }
}

ModeChecks mode_checks() {
  const int m = g_mode.load(std::memory_order_relaxed);
  if (m != kUnset) return static_cast<ModeChecks>(m);
  const ModeChecks parsed = mode_checks_from_environment();
  int expected = kUnset;  // a concurrent set_mode_checks wins
  g_mode.compare_exchange_strong(expected, static_cast<int>(parsed));
  return static_cast<ModeChecks>(g_mode.load(std::memory_order_relaxed));
}

void set_mode_checks(ModeChecks mode) { g_mode.store(static_cast<int>(mode), std::memory_order_relaxed); }

ModeChecks effective_mode_checks() {
  return t_override != kUnset ? static_cast<ModeChecks>(t_override) : mode_checks();
}

ModeChecksScope::ModeChecksScope(ModeChecks mode) : prev_(t_override) { t_override = static_cast<int>(mode); }
ModeChecksScope::~ModeChecksScope() { t_override = prev_; }

ModeChecksOption::ModeChecksOption(std::optional<bool> on) {
  if (!on) return;
  ModeChecks mode = ModeChecks::Off;
  if (*on) {
    mode = effective_mode_checks();
    if (mode == ModeChecks::Off) mode = ModeChecks::Warn;
  }
  scope_.emplace(mode);
}

void report_mode_issue(const std::string& kind, const std::string& message) {
  const ModeChecks mode = effective_mode_checks();
  if (mode == ModeChecks::Off) return;
  bool first = false;
  {
    Issues& s = issues();
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.counts[kind];
    if (mode == ModeChecks::Warn) first = s.warned.insert(kind).second;
  }
  if (mode == ModeChecks::Throw) throw std::logic_error(message);
  if (first) emit_warning(Warning{"mode_checks", kind, message});
}

void report_train_forward_unreached(const std::string& who, std::int64_t channels) noexcept {
  try {
    const ModeChecks mode = effective_mode_checks();
    if (mode == ModeChecks::Off) return;
    const std::string message =
        who + "(" + std::to_string(channels) +
        ") ran forward in train mode with gradients on, and its graph was freed without a backward: its "
        "running_mean and running_var took the statistics of a batch that no step trained on (a validation "
        "pass without eval()?). Call model.eval() before evaluating and model.train() after; a deliberate "
        "train-mode forward without backward goes inside a tapegrad::ModeChecksPause";
    if (mode == ModeChecks::Throw) {
      {
        std::lock_guard<std::mutex> lock(issues().mu);
        ++issues().counts["bn_train_no_backward"];
      }
      static const bool at_exit = std::atexit(fail_on_pending_at_exit) == 0;
      (void)at_exit;
      std::lock_guard<std::mutex> lock(g_pending_mu);
      if (!g_pending.load(std::memory_order_relaxed)) g_pending_message = message;
      g_pending.store(true, std::memory_order_release);
      return;
    }
    report_mode_issue("bn_train_no_backward", message);
  } catch (...) {  // called from a destructor: nothing may escape (allocation failure)
  }
}

void throw_pending_mode_issue() {
  if (!g_pending.load(std::memory_order_acquire)) return;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    if (!g_pending.load(std::memory_order_relaxed)) return;
    message = std::move(g_pending_message);
    g_pending_message.clear();
    g_pending.store(false, std::memory_order_relaxed);
  }
  throw std::logic_error(message);
}

std::int64_t mode_issue_count(const std::string& kind) {
  Issues& s = issues();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto it = s.counts.find(kind);
  return it == s.counts.end() ? 0 : it->second;
}

std::map<std::string, std::int64_t> mode_issue_counts() {
  Issues& s = issues();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.counts;
}

std::map<std::string, std::int64_t> mode_issue_counts_since(const std::map<std::string, std::int64_t>& before) {
  std::map<std::string, std::int64_t> out;
  for (const auto& [kind, n] : mode_issue_counts()) {
    const auto it = before.find(kind);
    const std::int64_t d = n - (it == before.end() ? 0 : it->second);
    if (d > 0) out[kind] = d;
  }
  return out;
}

void reset_mode_issues() {
  Issues& s = issues();
  std::lock_guard<std::mutex> lock(s.mu);
  s.counts.clear();
  s.warned.clear();
  std::lock_guard<std::mutex> pending_lock(g_pending_mu);
  g_pending_message.clear();
  g_pending.store(false, std::memory_order_relaxed);
}

}  // namespace tapegrad
