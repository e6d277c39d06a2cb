#pragma once
// Mode checks: cheap detectors of module-mode mistakes, on by default, that the layers run
// (layers/functional/batch_norm.cpp, Module::load_state_dict):
//   bn_train_no_grad       a BatchNorm (or InstanceNorm) that tracks running statistics ran
//                          forward in train mode under NoGradGuard (a validation loop without
//                          eval()): its running statistics took the evaluated batch.
//   never_updated_stats    a tracked BatchNorm ran forward in eval mode on running statistics
//                          never updated (num_batches_tracked 0, running_mean 0, running_var 1).
//   bn_buffers_not_loaded  a non-strict load left a BatchNorm's running_mean / running_var at
//                          their initial values because the state dict lacked them.
//   bn_train_no_backward   a tracked BatchNorm (or InstanceNorm) ran forward in train mode with
//                          gradients on, and its graph was freed without a backward through it
//                          (a validation pass in train mode): its running statistics took a
//                          batch no step trained on. A graph freed while an exception unwinds
//                          is not reported. Found where the graph is freed (a destructor), so
//                          under Throw the error is raised at the next check point instead:
//                          the next tracked BatchNorm/InstanceNorm forward on any thread, or
//                          throw_pending_mode_issue(); one still pending when the program
//                          ends prints its message and ends the process with status
//                          kPendingExitStatus (3). A backward that throws disarms the check
//                          on the graph it ran over (the exception already told the user).
// Warn (default): the first occurrence of each kind in the process is a warning through
// core/warnings.h (stderr by default), later ones are only counted (mode_issue_count).
// Throw: every occurrence throws std::logic_error with the warning's text, before any state
// changes. Off: nothing is checked. The process setting starts from the environment variable
// TAPEGRAD_MODE_CHECKS: "0"/"off", "1"/"warn" (also when unset or empty), "throw".
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tapegrad {

/// What the mode checks do.
enum class ModeChecks { Off, Warn, Throw };

/// The exit status of a program that ends under Throw with a bn_train_no_backward error
/// still pending (see the list above).
inline constexpr int kPendingExitStatus = 3;

/// "0" / "off" -> Off, "1" / "warn" -> Warn, "throw" -> Throw (case-insensitive). Throws
/// std::invalid_argument naming `value` and the accepted values otherwise.
ModeChecks parse_mode_checks(const std::string& value);
/// TAPEGRAD_MODE_CHECKS read now: Warn when unset or empty, else parse_mode_checks of its
/// value; std::invalid_argument naming the variable and its value otherwise.
ModeChecks mode_checks_from_environment();
/// The process-wide setting: set_mode_checks' last value, else TAPEGRAD_MODE_CHECKS, else
/// Warn. Throws std::invalid_argument (from parse_mode_checks, naming the variable) while the
/// variable holds an invalid value and set_mode_checks was not called.
ModeChecks mode_checks();
/// Sets the process-wide setting (thread-safe).
void set_mode_checks(ModeChecks mode);
/// The setting on the calling thread: the innermost ModeChecksScope, else mode_checks().
ModeChecks effective_mode_checks();

/// RAII: the calling thread uses `mode` instead of the process setting while it lives
/// (nested scopes restore the outer one).
class ModeChecksScope {
 public:
  /// Uses `mode` on the calling thread until destruction.
  explicit ModeChecksScope(ModeChecks mode);
  /// Restores the calling thread's previous setting.
  ~ModeChecksScope();
  ModeChecksScope(const ModeChecksScope&) = delete;
  ModeChecksScope& operator=(const ModeChecksScope&) = delete;

 private:
  int prev_;
};

/// RAII: no mode check runs on the calling thread while it lives: for deliberate uses (a
/// train-mode forward under no-grad that recalibrates statistics, a study's reproduction).
class ModeChecksPause : public ModeChecksScope {
 public:
  /// Turns the checks off on the calling thread until destruction.
  ModeChecksPause() : ModeChecksScope(ModeChecks::Off) {}
};

/// RAII for a call's option (train::FitOptions::mode_checks, EvalOptions::mode_checks):
/// unset -> the calling thread's setting; false -> paused; true -> on (the calling thread's
/// setting, or Warn where that is Off).
class ModeChecksOption {
 public:
  /// Applies `on` (see the class) on the calling thread until destruction.
  explicit ModeChecksOption(std::optional<bool> on);
  ModeChecksOption(const ModeChecksOption&) = delete;
  ModeChecksOption& operator=(const ModeChecksOption&) = delete;

 private:
  std::optional<ModeChecksScope> scope_;
};

/// Reports one occurrence of mode issue `kind` (counted): Throw -> std::logic_error(message);
/// Warn -> a warning {source "mode_checks", kind, message} for the first occurrence of `kind`
/// in the process (or since reset_mode_issues), nothing more for later ones; Off -> nothing
/// (callers test effective_mode_checks() first).
void report_mode_issue(const std::string& kind, const std::string& message);
/// The bn_train_no_backward check's report (called by the autograd engine when a node marked
/// by autograd::watch_train_forward is freed unreached; never throws): counted; Warn -> the
/// first occurrence warns; Throw -> kept pending for throw_pending_mode_issue(); Off -> nothing.
void report_train_forward_unreached(const std::string& who, std::int64_t channels) noexcept;
/// Throws the pending bn_train_no_backward error (std::logic_error) if one is pending, and
/// clears it. Cheap when none is (one relaxed atomic load).
void throw_pending_mode_issue();
/// Occurrences of `kind` reported so far (Warn and Throw).
std::int64_t mode_issue_count(const std::string& kind);
/// Occurrences reported so far, by kind (kinds never reported are absent).
std::map<std::string, std::int64_t> mode_issue_counts();
/// mode_issue_counts() minus `before` (an earlier mode_issue_counts()), kinds with 0 left out:
/// what was reported in between (by every thread).
std::map<std::string, std::int64_t> mode_issue_counts_since(const std::map<std::string, std::int64_t>& before);
/// Forgets the counts and which kinds have warned (tests).
void reset_mode_issues();

}  // namespace tapegrad
