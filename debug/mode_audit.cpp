#include <tapegrad/debug/mode_audit.h>

#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/dropout.h>
#include <tapegrad/layers/hooks.h>
#include <tapegrad/optim/step_hooks.h>

namespace tapegrad::debug {
namespace {

thread_local int t_pause_depth = 0;
// > 0 while this thread holds some audit's lock: a graph dropped then (see
// BnTrainNoBackward) queues its report instead of taking the lock again.
thread_local int t_lock_depth = 0;
constexpr std::size_t kMaxFindings = 1000;

bool is_dropout(const layers::Module& m) {
  if (auto* d = dynamic_cast<const layers::Dropout*>(&m)) return d->p > 0.0;
  // Other dropout flavours (not derived from Dropout) are matched by PyTorch's type names.
  const std::string t = m.type_name();
  if (t.find("Dropout") == std::string::npos) return false;
  const std::string r = m.extra_repr();
  const auto at = r.find("p=");
  if (at != std::string::npos) {
    try {
      if (std::stod(r.substr(at + 2)) == 0.0) return false;
    } catch (const std::exception&) {
    }
  }
  return true;
}

std::string label(const std::string& path, const std::string& type) {
  return "'" + (path.empty() ? std::string("(root)") : path) + "' (" + type + ")";
}
std::string label(const std::string& path, const layers::Module& m) { return label(path, m.type_name()); }

// Running statistics at their initial values: nothing was ever tracked.
bool never_updated(const layers::BatchNormBase& bn) {
  if (bn.num_batches_tracked.data<std::int64_t>()[0] != 0) return false;
  for (double v : bn.running_mean.to_vector())
    if (v != 0.0) return false;
  for (double v : bn.running_var.to_vector())
    if (v != 1.0) return false;
  return true;
}

}  // namespace

const char* issue_name(Issue issue) {
  switch (issue) {
    case Issue::BnTrainNoGrad: return "bn_train_no_grad";
    case Issue::StepInEval: return "step_in_eval";
    case Issue::FrozenRunningStats: return "frozen_running_stats";
    case Issue::DropoutNoGrad: return "dropout_no_grad";
    case Issue::BnTrainNoBackward: return "bn_train_no_backward";
    case Issue::NeverUpdatedStats: return "never_updated_stats";
  }
  return "unknown";
}

AuditPause::AuditPause() { ++t_pause_depth; }
AuditPause::~AuditPause() { --t_pause_depth; }
bool AuditPause::active() { return t_pause_depth > 0; }

struct ModeAudit::State {
  layers::Module* model = nullptr;
  ModeAuditOptions opt;
  mutable std::mutex mu;
  std::unordered_map<const layers::Module*, std::string> paths;
  std::vector<std::pair<std::string, layers::Module*>> modules;
  std::unordered_set<const TensorImpl*> params;
  std::vector<std::pair<std::string, layers::BatchNormBase*>> tracked_bns;
  std::vector<std::pair<Tensor, Tensor>> snapshot;  // (running_mean, running_var) copies
  std::int64_t snapshot_step = -1;
  ModeAuditCounts counts;
  std::vector<ModeFinding> findings;
  int logged[6] = {0, 0, 0, 0, 0, 0};
  std::unordered_set<const layers::Module*> never_updated_reported;
  // BnTrainNoBackward reports queued while the lock was held (module path, type), and the
  // message to throw at the next hook with throw_on_issue (a graph's teardown cannot throw).
  std::mutex pending_mu;
  std::vector<std::pair<std::string, std::string>> pending_unreached;
  std::string deferred_throw;

  // The audit's lock, marking this thread as holding one, and the queued reports drained.
  struct Locked {
    explicit Locked(State& s) : state(s), lock(s.mu) {
      ++t_lock_depth;
      state.drain();
    }
    ~Locked() { --t_lock_depth; }
    State& state;
    std::lock_guard<std::mutex> lock;
  };

  void drain() {
    std::vector<std::pair<std::string, std::string>> queued;
    {
      std::lock_guard<std::mutex> l(pending_mu);
      queued.swap(pending_unreached);
    }
    for (auto& [path, type] : queued) report_unreached(path, type);
  }

  void report_unreached(const std::string& path, const std::string& type) {
    const std::string e =
        report(Issue::BnTrainNoBackward, path,
               label(path, type) + " ran forward in train mode with gradients enabled, and that forward's graph was "
               "freed without backward() reaching it: a validation (or inference) pass in train mode. Its batch "
               "statistics were written into running_mean / running_var. Call model.eval() (and evaluate under "
               "NoGradGuard) before evaluating.");
    if (!e.empty() && deferred_throw.empty()) deferred_throw = e;
  }

  // Throws (once) what a graph teardown could not.
  std::string take_deferred() {
    std::string e;
    e.swap(deferred_throw);
    return e;
  }

  bool allowed(const std::string& path) const {
    for (auto& a : opt.allow_eval)
      if (a.empty() || path == a || (path.size() > a.size() && path.compare(0, a.size(), a) == 0 && path[a.size()] == '.'))
        return true;
    return false;
  }

  void rebuild() {
    paths.clear();
    params.clear();
    tracked_bns.clear();
    modules = model->named_modules();
    for (auto& [p, m] : modules) {
      paths[m] = p;
      if (auto* bn = dynamic_cast<layers::BatchNormBase*>(m); bn && bn->running_mean.defined())
        tracked_bns.emplace_back(p, bn);
    }
    for (auto& t : model->parameters()) params.insert(t.impl().get());
    snapshot.clear();
    snapshot_step = -1;
  }

  // Records an issue; returns the message when the caller must throw.
  std::string report(Issue k, const std::string& module, std::string msg) {
    std::int64_t* c = k == Issue::BnTrainNoGrad        ? &counts.bn_train_no_grad
                      : k == Issue::StepInEval         ? &counts.step_in_eval
                      : k == Issue::FrozenRunningStats ? &counts.frozen_running_stats
                      : k == Issue::DropoutNoGrad      ? &counts.dropout_no_grad
                      : k == Issue::BnTrainNoBackward  ? &counts.bn_train_no_backward
                                                       : &counts.never_updated_stats;
    ++*c;
    msg = std::string("mode audit [") + issue_name(k) + "]: " + msg;
    if (findings.size() < kMaxFindings) findings.push_back({k, module, counts.steps, msg});
    int& n = logged[static_cast<int>(k)];
    if (n < opt.log_limit) {
      ++n;
      ++counts.warnings;
      emit_warning({"mode_audit", issue_name(k),
                    msg + (n == opt.log_limit ? " (further ones of this kind are only counted)" : "")},
                   opt.warning_handler);
    }
    return opt.throw_on_issue ? msg : std::string();
  }

  void take_snapshot() {
    snapshot.clear();
    for (auto& [p, bn] : tracked_bns) snapshot.emplace_back(bn->running_mean.clone(), bn->running_var.clone());
    snapshot_step = counts.steps;
  }

  std::string on_forward(layers::Module& m, const Tensor& output, const std::weak_ptr<State>& self) {
    auto it = paths.find(&m);
    if (it == paths.end()) return take_deferred();
    ++counts.forwards;
    std::string err = take_deferred();
    auto* tracked_bn = dynamic_cast<layers::BatchNormBase*>(&m);
    if (tracked_bn && !tracked_bn->running_mean.defined()) tracked_bn = nullptr;
    if (!m.is_training()) {
      if (opt.never_updated_stats && tracked_bn && !never_updated_reported.count(&m) && never_updated(*tracked_bn)) {
        never_updated_reported.insert(&m);
        const std::string e =
            report(Issue::NeverUpdatedStats, it->second,
                   label(it->second, m) + " ran forward in eval mode on running statistics that were never updated "
                   "(num_batches_tracked 0, running_mean 0, running_var 1): it normalises with the initial "
                   "values, not with statistics of the data. Was a weights-only checkpoint loaded non-strictly "
                   "(the buffers missing), or the net never trained in train mode?");
        if (err.empty()) err = e;
      }
      return err;
    }
    if (grad_mode_enabled()) {
      // Train mode with the tape on: fine if a backward reaches this forward's graph.
      if (opt.bn_train_no_backward && tracked_bn && output.defined() && output.requires_grad() &&
          output.impl()->autograd->grad_fn) {
        autograd::on_graph_released(output, [self, path = it->second, type = m.type_name()](bool reached) {
          if (reached) return;
          auto s = self.lock();
          if (!s) return;
          if (t_lock_depth > 0) {
            std::lock_guard<std::mutex> l(s->pending_mu);
            s->pending_unreached.emplace_back(path, type);
            return;
          }
          Locked l(*s);
          s->report_unreached(path, type);
        });
      }
      return err;
    }
    std::string e;
    if (opt.bn_train_no_grad && tracked_bn)
      e = report(Issue::BnTrainNoGrad, it->second,
                 label(it->second, m) + " ran forward in train mode with gradients disabled: an evaluation in "
                 "train mode normalises with the batch's own statistics and writes them into running_mean / "
                 "running_var. Call model.eval() before evaluating.");
    else if (opt.dropout_no_grad && is_dropout(m))
      e = report(Issue::DropoutNoGrad, it->second,
                 label(it->second, m) + " is active (train mode) inside a no-grad evaluation: units are dropped "
                 "at random and the prediction is noisy. Call model.eval() before evaluating.");
    return err.empty() ? e : err;
  }

  std::string on_step(const std::vector<Tensor>& step_params) {
    bool ours = false;
    for (auto& p : step_params)
      if (p.defined() && params.count(p.impl().get())) {
        ours = true;
        break;
      }
    if (!ours) return take_deferred();
    ++counts.steps;
    std::string err = take_deferred();
    if (opt.step_in_eval) {
      std::vector<std::string> in_eval;
      for (auto& [p, m] : modules)
        if (!m->is_training() && !allowed(p)) in_eval.push_back(label(p, *m));
      if (!in_eval.empty()) {
        std::string names;
        for (std::size_t i = 0; i < in_eval.size() && i < 5; ++i) names += (i ? ", " : "") + in_eval[i];
        if (in_eval.size() > 5) names += ", ...";
        err = report(Issue::StepInEval, "",
                     "optimizer step " + std::to_string(counts.steps) + " while " + std::to_string(in_eval.size()) +
                     " module(s) of the model are in eval mode: " + names +
                     ". train() was probably forgotten after validation (BatchNorm then trains on frozen running "
                     "statistics, Dropout is off).");
      }
    }
    if (opt.frozen_running_stats && !tracked_bns.empty()) {
      if (snapshot_step < 0) {
        take_snapshot();
      } else if (counts.steps - snapshot_step >= opt.stats_check_every) {
        for (std::size_t i = 0; i < tracked_bns.size(); ++i) {
          auto& [p, bn] = tracked_bns[i];
          if (allowed(p)) continue;
          const bool same = bn->running_mean.to_vector() == snapshot[i].first.to_vector() &&
                            bn->running_var.to_vector() == snapshot[i].second.to_vector();
          if (!same) continue;
          std::string why = !bn->is_training()                                  ? "it is in eval mode"
                            : (bn->options.momentum && *bn->options.momentum == 0) ? "its momentum is 0"
                                                                                  : "it was not called in train mode";
          std::string e = report(Issue::FrozenRunningStats, p,
                                 "the running statistics of " + label(p, *bn) + " did not change over the last " +
                                     std::to_string(counts.steps - snapshot_step) + " optimizer steps (" + why +
                                     "): evaluation will use statistics that do not describe the trained network.");
          if (err.empty()) err = e;
        }
        take_snapshot();
      }
    }
    return err;
  }
};

ModeAudit::ModeAudit(layers::Module& model, ModeAuditOptions options) : state_(std::make_shared<State>()) {
  if (options.stats_check_every < 1)
    throw std::invalid_argument("ModeAudit: stats_check_every must be >= 1, got " +
                                std::to_string(options.stats_check_every));
  state_->model = &model;
  state_->opt = std::move(options);
  state_->rebuild();
  std::weak_ptr<State> weak = state_;
  forward_id_ = layers::hooks::add_forward_hook([weak](layers::Module& m, const Tensor&, const Tensor& output) {
    if (AuditPause::active()) return;
    auto s = weak.lock();
    if (!s) return;
    std::string err;
    {
      State::Locked l(*s);
      err = s->on_forward(m, output, weak);
    }
    if (!err.empty()) throw std::logic_error(err);
  });
  step_id_ = optim::hooks::add_step_hook([weak](const std::vector<Tensor>& params) {
    if (AuditPause::active()) return;
    auto s = weak.lock();
    if (!s) return;
    std::string err;
    {
      State::Locked l(*s);
      err = s->on_step(params);
    }
    if (!err.empty()) throw std::logic_error(err);
  });
}

ModeAudit::~ModeAudit() {
  layers::hooks::remove_hook(forward_id_);
  optim::hooks::remove_step_hook(step_id_);
  try {
    State::Locked l(*state_);  // reports of graphs freed while the lock was held go out now
  } catch (...) {  // a throwing warning handler: nothing may leave a destructor
  }
}

ModeAuditCounts ModeAudit::counts() const {
  State::Locked l(*state_);
  return state_->counts;
}

std::int64_t ModeAudit::count(Issue issue) const {
  const auto c = counts();
  switch (issue) {
    case Issue::BnTrainNoGrad: return c.bn_train_no_grad;
    case Issue::StepInEval: return c.step_in_eval;
    case Issue::FrozenRunningStats: return c.frozen_running_stats;
    case Issue::DropoutNoGrad: return c.dropout_no_grad;
    case Issue::BnTrainNoBackward: return c.bn_train_no_backward;
    case Issue::NeverUpdatedStats: return c.never_updated_stats;
  }
  return 0;
}

std::vector<ModeFinding> ModeAudit::findings() const {
  State::Locked l(*state_);
  return state_->findings;
}

std::string ModeAudit::summary() const {
  State::Locked l(*state_);
  const auto& c = state_->counts;
  std::ostringstream os;
  os << "mode audit: " << c.steps << " steps, " << c.forwards << " module forwards, " << c.issues() << " issue(s)";
  const std::pair<Issue, std::int64_t> kinds[] = {{Issue::BnTrainNoGrad, c.bn_train_no_grad},
                                                  {Issue::StepInEval, c.step_in_eval},
                                                  {Issue::FrozenRunningStats, c.frozen_running_stats},
                                                  {Issue::DropoutNoGrad, c.dropout_no_grad},
                                                  {Issue::BnTrainNoBackward, c.bn_train_no_backward},
                                                  {Issue::NeverUpdatedStats, c.never_updated_stats}};
  for (auto& [k, n] : kinds) {
    if (n == 0) continue;
    os << "\n  " << issue_name(k) << " x" << n;
    for (auto& f : state_->findings)
      if (f.issue == k) {
        os << " (first: " << f.message << ")";
        break;
      }
  }
  return os.str();
}

void ModeAudit::refresh() {
  State::Locked l(*state_);
  state_->rebuild();
}

}  // namespace tapegrad::debug
