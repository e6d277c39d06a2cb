#pragma once
// ModeAudit: switch it on around a training loop and it reports module-mode bugs as they
// happen, as warnings (debug/warnings.h: stderr by default, or a handler of yours) and
// through counters a test can read.
//
//   tapegrad::debug::ModeAudit audit(model);   // RAII: installed here, removed at scope end
//   ... the user's unchanged training loop ...
//   REQUIRE(audit.clean());                     // or audit.count(Issue::StepInEval), audit.summary()
//
// Detectors (each can be switched off in ModeAuditOptions):
//  BnTrainNoGrad      a BatchNorm of the model ran forward in train mode while gradients were
//                     disabled: an evaluation in train mode, so the evaluated data leaked
//                     into running_mean / running_var (and its outputs depended on the batch).
//                     Only modules that track running statistics are checked.
//  StepInEval         an optimizer step() updated parameters of the model while some module of
//                     the model was in eval mode (train() forgotten after validation).
//  FrozenRunningStats over `stats_check_every` optimizer steps the running statistics of a
//                     tracked BatchNorm did not change at all (eval-mode training, momentum 0,
//                     or a BatchNorm that is never called).
//  DropoutNoGrad      a Dropout of the model ran in train mode (p > 0) while gradients were
//                     disabled: an evaluation with random units dropped.
//  BnTrainNoBackward  a tracked BatchNorm ran forward in train mode with gradients enabled
//                     and the graph of that forward was dropped without backward() ever
//                     reaching it: a validation pass in train mode with gradients on (the
//                     commonest form of the bug), whose data leaked into the running
//                     statistics. Reported when the graph is freed (so, with
//                     throw_on_issue, thrown at the next forward or step the audit sees).
//  NeverUpdatedStats  a tracked BatchNorm ran forward in eval mode on running statistics that
//                     were never updated (num_batches_tracked 0, running_mean all 0,
//                     running_var all 1): e.g. weights-only file loaded non-strictly, or an
//                     untrained net evaluated. Reported once per layer, at its first such
//                     forward.
// Hooks are process-wide (layers/hooks.h) but the audit only looks at the modules of `model`
// (taken at construction; call refresh() after adding modules) and at optimizer steps that
// update at least one of its parameters. Deliberate patterns (fine-tuning with frozen
// BatchNorm, recomputing BN statistics under no-grad) are allowed with allow_eval / by
// switching the detector off. AuditPause silences every audit on the calling thread (the
// measurement helpers of debug/ use it).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/debug/warnings.h>
#include <tapegrad/layers/module.h>

namespace tapegrad::debug {

/// The mode bugs ModeAudit detects (the list at the top of this header says what each is).
enum class Issue { BnTrainNoGrad, StepInEval, FrozenRunningStats, DropoutNoGrad, BnTrainNoBackward, NeverUpdatedStats };
/// "bn_train_no_grad", "step_in_eval", "frozen_running_stats", "dropout_no_grad",
/// "bn_train_no_backward", "never_updated_stats".
const char* issue_name(Issue issue);

/// Which detectors run and how ModeAudit reports. Every detector is on by default.
struct ModeAuditOptions {
  /// Detect Issue::BnTrainNoGrad: a tracked BatchNorm in train mode under no-grad.
  bool bn_train_no_grad = true;
  /// Detect Issue::StepInEval: an optimizer step while a module is in eval mode.
  bool step_in_eval = true;
  /// Detect Issue::FrozenRunningStats: running statistics unchanged over
  /// stats_check_every steps.
  bool frozen_running_stats = true;
  /// Detect Issue::DropoutNoGrad: a train-mode Dropout (p > 0) under no-grad.
  bool dropout_no_grad = true;
  /// Detect Issue::BnTrainNoBackward: a train-mode BatchNorm graph freed without backward.
  bool bn_train_no_backward = true;
  /// Detect Issue::NeverUpdatedStats: eval mode on running statistics never updated.
  bool never_updated_stats = true;
  /// FrozenRunningStats compares the statistics every this many optimizer steps (>= 1).
  std::int64_t stats_check_every = 10;
  /// Module paths (and their descendants) allowed to be in eval mode during steps and to
  /// keep frozen statistics, e.g. {"1", "4"} for a deliberately frozen BatchNorm.
  std::vector<std::string> allow_eval;
  /// Warnings per kind of issue (later ones are only counted); 0 = silent.
  int log_limit = 3;
  /// Where this audit's warnings go; empty: the process-wide route of debug/warnings.h
  /// (stderr by default).
  WarningHandler warning_handler;
  /// Throw std::logic_error from the hook on the first issue (the message names it).
  bool throw_on_issue = false;
};

/// One detected issue.
struct ModeFinding {
  /// Which detector fired.
  Issue issue;
  std::string module;  ///< dotted path of the module concerned ("" = the model itself)
  std::int64_t step;   ///< optimizer steps seen before it (0 = before the first step)
  /// The warning text (what happened, where, what to do).
  std::string message;
};

/// How often each issue occurred, and what the audit observed.
struct ModeAuditCounts {
  ///@{
  /// Occurrences of the issue of the same name (see Issue), counted past log_limit too.
  std::int64_t bn_train_no_grad = 0, step_in_eval = 0, frozen_running_stats = 0, dropout_no_grad = 0;
  std::int64_t bn_train_no_backward = 0, never_updated_stats = 0;
  ///@}
  std::int64_t warnings = 0;  ///< warnings emitted (at most log_limit per kind)
  std::int64_t forwards = 0;  ///< forward calls of the model's modules observed
  std::int64_t steps = 0;     ///< optimizer steps on the model's parameters observed
  /// Sum of the six issue counts.
  std::int64_t issues() const {
    return bn_train_no_grad + step_in_eval + frozen_running_stats + dropout_no_grad + bn_train_no_backward +
           never_updated_stats;
  }
};

/// Reports module-mode bugs of `model` while it lives (see the detectors at the top of this
/// header): installs process-wide hooks at construction, removes them at destruction. Not
/// copyable.
class ModeAudit {
 public:
  /// Installs the hooks. `model` must outlive the audit. Throws std::invalid_argument for
  /// stats_check_every < 1.
  explicit ModeAudit(layers::Module& model, ModeAuditOptions options = {});
  ~ModeAudit();
  ModeAudit(const ModeAudit&) = delete;
  ModeAudit& operator=(const ModeAudit&) = delete;

  /// Counts so far.
  ModeAuditCounts counts() const;
  /// How often `issue` occurred so far.
  std::int64_t count(Issue issue) const;
  /// true when no issue occurred so far.
  bool clean() const { return counts().issues() == 0; }
  /// The first 1000 findings, in order.
  std::vector<ModeFinding> findings() const;
  /// "mode audit: 12 steps, 3 issues: step_in_eval x3 (first: ...)".
  std::string summary() const;
  /// Re-reads the model's module tree and parameters.
  void refresh();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::uint64_t forward_id_ = 0, step_id_ = 0;
};

/// RAII: while alive, every ModeAudit ignores what happens on this thread, and so do the
/// core mode checks (core/mode_checks.h: it holds a ModeChecksPause).
class AuditPause {
 public:
  AuditPause();
  ~AuditPause();
  AuditPause(const AuditPause&) = delete;
  AuditPause& operator=(const AuditPause&) = delete;
  /// True inside an AuditPause on this thread.
  static bool active();

 private:
  ModeChecksPause checks_;
};

}  // namespace tapegrad::debug
