#include <tapegrad/layers/functional/instance_norm.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/layers/functional/batch_norm.h>
#include <tapegrad/layers/functional/grouped_norm.h>

namespace tapegrad::layers::functional {

namespace {
void check_channels(const Tensor& t, const char* what, const Tensor& x, std::int64_t C) {
  if (t.defined() && t.shape() != Shape{C})
    throw std::invalid_argument(std::string("instance_norm: expected ") + what + " of shape [" + std::to_string(C) +
                                "] for input of shape " + shape_str(x.shape()) + ", got " + shape_str(t.shape()));
  if (t.defined() && t.dtype() != x.dtype())
    throw std::invalid_argument(std::string("instance_norm: ") + what + " has dtype " + dtype_name(t.dtype()) +
                                " but the input is " + dtype_name(x.dtype()));
}
}  // namespace

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  if (!x.defined() || x.dim() < 3)
    throw std::invalid_argument("instance_norm: expected input of shape (N, C, L) or (N, C, H, W), got " +
                                (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  const std::int64_t N = x.size(0), C = x.size(1);
  std::int64_t S = 1;
  for (std::int64_t i = 2; i < x.dim(); ++i) S *= x.size(i);
  check_channels(weight, "weight", x, C);
  check_channels(bias, "bias", x, C);
  check_channels(running_mean, "running_mean", x, C);
  check_channels(running_var, "running_var", x, C);
  if (running_mean.defined() != running_var.defined())
    throw std::invalid_argument("instance_norm: running_mean and running_var must both be given or both be omitted");
  if (!use_input_stats) {
    if (!running_mean.defined())
      throw std::invalid_argument("instance_norm: use_input_stats=false needs running_mean and running_var");
    // Per-channel running statistics: exactly batch_norm's eval mode.
    return batch_norm(x, running_mean, running_var, weight, bias, false, 0.0, eps);
  }
  if (S <= 1)
    throw std::invalid_argument("instance_norm: expected more than 1 spatial element when using input statistics, "
                                "got input of shape " + shape_str(x.shape()));
  if (running_mean.defined() && !(momentum >= 0.0 && momentum <= 1.0))
    throw std::invalid_argument("instance_norm: momentum must be in [0, 1], got " + std::to_string(momentum));
  std::vector<double> mean, var;
  Tensor out = detail::grouped_norm(x, C, S, C, weight, bias, eps, "instance_norm", &mean, &var);
  if (running_mean.defined() && N > 0) {
    // run = (1 - m)·run + m·(average over the batch of the per-instance statistic)
    const double unbias = static_cast<double>(S) / static_cast<double>(S - 1);
    TAPEGRAD_DISPATCH_FLOAT(x.dtype(), "instance_norm", [&] {
      scalar_t* rm = running_mean.data<scalar_t>();
      scalar_t* rv = running_var.data<scalar_t>();
      for (std::int64_t c = 0; c < C; ++c) {
        double sm = 0, sv = 0;
        for (std::int64_t n = 0; n < N; ++n) {
          sm += mean[n * C + c];
          sv += var[n * C + c] * unbias;
        }
        rm[c] = static_cast<scalar_t>((1.0 - momentum) * rm[c] + momentum * sm / static_cast<double>(N));
        rv[c] = static_cast<scalar_t>((1.0 - momentum) * rv[c] + momentum * sv / static_cast<double>(N));
      }
    });
  }
  return out;
}

}  // namespace tapegrad::layers::functional
