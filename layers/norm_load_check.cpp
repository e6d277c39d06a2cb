#include <tapegrad/layers/norm_load_check.h>

#include <algorithm>

#include <tapegrad/core/mode_checks.h>
#include <tapegrad/layers/channel_norm.h>

namespace tapegrad::layers {
namespace {

// Whether every value of t equals v.
bool all_equal(const Tensor& t, double v) {
  return TAPEGRAD_DISPATCH_FLOAT(t.dtype(), "check_norm_buffers_loaded", [&] {
    const scalar_t* p = t.data<scalar_t>();
    return std::all_of(p, p + t.numel(), [&](scalar_t x) { return x == static_cast<scalar_t>(v); });
  });
}

}  // namespace

void check_norm_buffers_loaded(Module& model, const std::vector<std::string>& missing_keys) {
  if (missing_keys.empty() || effective_mode_checks() == ModeChecks::Off) return;
  const auto missing = [&](const std::string& key) {
    return std::find(missing_keys.begin(), missing_keys.end(), key) != missing_keys.end();
  };
  std::string found;
  int modules = 0;
  for (auto& [path, m] : model.named_modules()) {
    const auto* norm = dynamic_cast<const ChannelNormBase*>(m);
    if (!norm || !norm->running_mean.defined()) continue;
    const std::string prefix = path.empty() ? "" : path + ".";
    std::vector<std::string> keys;
    if (missing(prefix + "running_mean") && all_equal(norm->running_mean, 0.0)) keys.push_back(prefix + "running_mean");
    if (missing(prefix + "running_var") && all_equal(norm->running_var, 1.0)) keys.push_back(prefix + "running_var");
    if (keys.empty()) continue;
    if (++modules <= 4) {
      found += (found.empty() ? "" : "; ") + m->type_name() + "(" + std::to_string(norm->running_mean.numel()) +
               ") at '" + path + "' (" + keys.front() + (keys.size() > 1 ? ", " + keys.back() : "") + ")";
    }
  }
  if (modules == 0) return;
  if (modules > 4) found += "; and " + std::to_string(modules - 4) + " more";
  report_mode_issue("bn_buffers_not_loaded",
                    "load_state_dict (strict=false): the state dict lacks the running statistics of " +
                        std::to_string(modules) + " norm module" + (modules == 1 ? "" : "s") + ", which keep their " +
                        "initial values (running_mean 0, running_var 1): " + found +
                        ". In eval mode they normalise with mean 0 and variance 1 instead of the training data's. "
                        "Load a file saved with its buffers (a weights-only file lacks them), or recompute them "
                        "(debug::recalibrate_batch_norm); a deliberate load goes inside a tapegrad::ModeChecksPause");
}

}  // namespace tapegrad::layers
