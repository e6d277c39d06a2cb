#include <tapegrad/layers/functional/instance_norm.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/grouped_norm.h>

namespace tapegrad::layers::functional {

namespace {
void check_channels(const std::string& who, const Tensor& t, const char* what, const Tensor& x, std::int64_t C) {
  if (t.defined() && t.shape() != Shape{C})
    throw std::invalid_argument(who + ": expected " + what + " of shape [" + std::to_string(C) +
                                "] for input of shape " + shape_str(x.shape()) + ", got " + shape_str(t.shape()));
  if (t.defined() && t.dtype() != x.dtype())
    throw std::invalid_argument(who + ": " + what + " has dtype " + dtype_name(t.dtype()) + " but the input is " +
                                dtype_name(x.dtype()));
}
}  // namespace

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  // momentum only matters (and is only checked) when running statistics are updated
  const std::optional<double> f =
      use_input_stats && running_mean.defined() ? std::optional<double>(momentum) : std::nullopt;
  return instance_norm(x, weight, bias, RunningStats{running_mean, running_var, Tensor(), f, true}, use_input_stats, eps,
                       "instance_norm");
}

Tensor instance_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const RunningStats& running,
                     bool use_input_stats, double eps, const std::string& who) {
  if (!x.defined() || x.dim() < 3)
    throw std::invalid_argument(who + ": expected input of shape (N, C, L) or (N, C, H, W), got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  const std::int64_t N = x.size(0), C = x.size(1);
  std::int64_t S = 1;
  for (std::int64_t i = 2; i < x.dim(); ++i) S *= x.size(i);
  check_channels(who, weight, "weight", x, C);
  check_channels(who, bias, "bias", x, C);
  if (!use_input_stats) {
    if (!running.defined())
      throw std::invalid_argument(who + ": use_input_stats=false needs running_mean and running_var");
    // Per-channel running statistics: exactly batch_norm's eval mode (which checks eps and running).
    return batch_norm(x, weight, bias, running, false, eps, who);
  }
  if (!(eps >= 0 && std::isfinite(eps)))
    throw std::invalid_argument(who + ": eps must be >= 0 and finite, got " + std::to_string(eps));
  running.check(who, x);
  check_values_per_channel(who, S, "spatial element per instance", "input of shape " + shape_str(x.shape()),
                           running.defined());
  running.check_mode(who, true);  // a tracked train-mode forward under no-grad; before any buffer changes
  std::vector<double> mean, var;
  Tensor out = detail::grouped_norm(x, C, S, C, weight, bias, eps, "instance_norm", &mean, &var);
  if (running.defined() && N > 0) {
    // the batch averages of the per-instance statistics
    std::vector<double> batch_mean(static_cast<std::size_t>(C)), batch_var(static_cast<std::size_t>(C));
    for (std::int64_t c = 0; c < C; ++c) {
      double sm = 0, sv = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        sm += mean[static_cast<std::size_t>(n * C + c)];
        sv += var[static_cast<std::size_t>(n * C + c)];
      }
      batch_mean[static_cast<std::size_t>(c)] = sm / static_cast<double>(N);
      batch_var[static_cast<std::size_t>(c)] = sv / static_cast<double>(N);
    }
    running.update(batch_mean.data(), batch_var.data(), S);
  }
  running.watch_backward(who, out);
  return out;
}

}  // namespace tapegrad::layers::functional
