// The running-statistics step of the per-channel norms (see running_stats.h).
#include <tapegrad/layers/functional/running_stats.h>

#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/counter.h>
#include <tapegrad/core/mode_checks.h>

namespace tapegrad::layers::functional {

double RunningStats::factor() const {
  if (momentum) return *momentum;
  const std::int64_t tracked = num_batches_tracked.defined() ? num_batches_tracked.data<std::int64_t>()[0] : 0;
  return 1.0 / (static_cast<double>(tracked) + 1.0);  // tracked + 1 in int64 overflows at INT64_MAX
}

void check_momentum(const std::string& who, double momentum) {
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw std::invalid_argument(who + ": momentum must be in [0, 1] (PyTorch convention; a Keras decay of 0.99 is "
                                "momentum 0.01, see momentum_from_decay), got " + std::to_string(momentum));
}

void RunningStats::check(const std::string& who, const Tensor& x) const {
  if (momentum) check_momentum(who, *momentum);
  if (running_mean.defined() != running_var.defined())
    throw std::invalid_argument(who + ": running_mean and running_var must both be given or both be omitted");
  if (!defined()) return;
  const std::int64_t C = x.size(1);
  for (const auto& [t, what] : {std::pair{&running_mean, "running_mean"}, std::pair{&running_var, "running_var"}}) {
    if (t->dim() != 1 || t->size(0) != C)  // compared without building a Shape (no allocation per call)
      throw std::invalid_argument(who + ": expected " + what + " of shape [" + std::to_string(C) +
                                  "] for input of shape " + shape_str(x.shape()) + ", got " + shape_str(t->shape()));
    if (t->dtype() != x.dtype())
      throw std::invalid_argument(who + ": " + what + " has dtype " + dtype_name(t->dtype()) + " but the input is " +
                                  dtype_name(x.dtype()));
  }
  if (num_batches_tracked.defined() && (num_batches_tracked.dtype() != Dtype::Int64 || num_batches_tracked.numel() != 1))
    throw std::invalid_argument(who + ": expected num_batches_tracked to be an int64 scalar, got " +
                                dtype_name(num_batches_tracked.dtype()) + " of shape " +
                                shape_str(num_batches_tracked.shape()));
  if (num_batches_tracked.defined() && num_batches_tracked.data<std::int64_t>()[0] < 0)
    throw std::invalid_argument(who + ": expected num_batches_tracked >= 0 (a batch count), got " +
                                std::to_string(num_batches_tracked.data<std::int64_t>()[0]));
}

void RunningStats::update(const double* mean, const double* biased_var, std::int64_t count) const {
  if (!defined()) return;
  const double f = factor();
  const double unbias = unbiased_var ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  const std::int64_t C = running_mean.numel();
  running_mean.impl()->storage->bump_version();  // in-place writes: a graph that saved them notices
  running_var.impl()->storage->bump_version();
  TAPEGRAD_DISPATCH_FLOAT(running_mean.dtype(), "running_stats_update", [&] {
    scalar_t* rm = running_mean.data<scalar_t>();
    scalar_t* rv = running_var.data<scalar_t>();
    for (std::int64_t c = 0; c < C; ++c) {
      rm[c] = static_cast<scalar_t>((1.0 - f) * rm[c] + f * mean[c]);
      rv[c] = static_cast<scalar_t>((1.0 - f) * rv[c] + f * biased_var[c] * unbias);
    }
  });
  if (num_batches_tracked.defined()) saturating_increment(num_batches_tracked.data<std::int64_t>()[0]);
}

namespace {
template <class T>
bool initial_values(const T* mean, const T* var, std::int64_t C) {
  for (std::int64_t c = 0; c < C; ++c)
    if (mean[c] != T(0) || var[c] != T(1)) return false;
  return true;
}
}  // namespace

void RunningStats::check_mode(const std::string& who, bool use_batch_stats) const {
  if (!defined()) return;
  throw_pending_mode_issue();
  if (use_batch_stats) {
    if (grad_mode_enabled() || effective_mode_checks() == ModeChecks::Off) return;
    report_mode_issue(
        "bn_train_no_grad",
        who + "(" + std::to_string(running_mean.numel()) +
            ") ran forward in train mode under NoGradGuard: its running_mean and running_var took the statistics of "
            "this batch (an evaluation without eval()?). Call model.eval() before evaluating and model.train() after; "
            "a deliberate train-mode forward without gradients goes inside a tapegrad::ModeChecksPause");
    return;
  }
  if (!num_batches_tracked.defined() || num_batches_tracked.data<std::int64_t>()[0] != 0) return;
  if (never_updated_reported && *never_updated_reported) return;
  const ModeChecks mode = effective_mode_checks();
  if (mode == ModeChecks::Off) return;
  const std::int64_t C = running_mean.numel();
  const bool initial = TAPEGRAD_DISPATCH_FLOAT(running_mean.dtype(), "check_mode", [&] {
    return initial_values(running_mean.data<scalar_t>(), running_var.data<scalar_t>(), C);
  });
  if (!initial) return;
  if (never_updated_reported && mode == ModeChecks::Warn) *never_updated_reported = true;
  report_mode_issue(
      "never_updated_stats",
      who + "(" + std::to_string(C) +
          ") ran forward in eval mode on running statistics that were never updated (num_batches_tracked 0, "
          "running_mean all 0, running_var all 1): it normalises with mean 0 and variance 1 instead of the training "
          "data's. Load a checkpoint that holds the buffers (a weights-only file loaded with strict=false leaves them "
          "at their initial values), train the model first, or recompute them (debug::recalibrate_batch_norm); a "
          "deliberate use goes inside a tapegrad::ModeChecksPause");
}

void RunningStats::watch_backward(const std::string& who, const Tensor& out) const {
  if (!defined() || !grad_mode_enabled() || effective_mode_checks() == ModeChecks::Off) return;
  autograd::watch_train_forward(out, who, running_mean.numel());
}

void check_values_per_channel(const std::string& who, std::int64_t count, const std::string& what,
                              const std::string& got, bool has_running_stats) {
  if (count > 1) return;
  const std::string head = who + ": expected more than 1 " + what;
  if (has_running_stats)
    throw std::invalid_argument(head + " when training, got " + got +
                                "; call eval() to run a single sample through running statistics");
  throw std::invalid_argument(head + ", got " + got +
                              "; there are no running statistics (track_running_stats=false), so eval() normalises "
                              "with batch statistics too and refuses this input as well");
}

}  // namespace tapegrad::layers::functional
