#include <tapegrad/layers/batch_norm.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <tapegrad/core/autograd.h>
#include <tapegrad/layers/functional/batch_norm.h>

namespace tapegrad::layers {

double momentum_from_decay(double decay) {
  if (!(decay >= 0.0 && decay <= 1.0))
    throw std::invalid_argument("momentum_from_decay: expected a decay in [0, 1], got " + std::to_string(decay));
  return 1.0 - decay;
}

double decay_from_momentum(double momentum) {
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw std::invalid_argument("decay_from_momentum: expected a momentum in [0, 1], got " + std::to_string(momentum));
  return 1.0 - momentum;
}

void check_batch_norm_options(const std::string& who, const BatchNormOptions& opts) {
  if (!(opts.eps >= 0 && std::isfinite(opts.eps)))
    throw std::invalid_argument(who + ": eps must be >= 0 and finite, got " + std::to_string(opts.eps));
  if (opts.momentum) functional::check_momentum(who, *opts.momentum);
}

BatchNormBase::BatchNormBase(std::int64_t c, BatchNormOptions opts) : num_features(c), options(opts) {
  if (c <= 0) throw std::invalid_argument("BatchNorm: num_features must be positive, got " + std::to_string(c));
  check_batch_norm_options("BatchNorm", opts);
  register_norm_state(c, opts.dtype, opts.affine, opts.track_running_stats);
}

BatchNormBase::BatchNormBase(const BatchNormBase& src, ShareState) : num_features(src.num_features), options(src.options) {
  share_norm_state(src);
  train(src.is_training());
}

std::int64_t BatchNormBase::batches_tracked() const {
  return num_batches_tracked.defined() ? num_batches_tracked.data<std::int64_t>()[0] : 0;
}

void BatchNormBase::check_features(const Tensor& x) const {
  if (x.size(1) != num_features)
    throw std::invalid_argument(type_name() + ": expected " + std::to_string(num_features) +
                                " channels (dim 1), got input of shape " + shape_str(x.shape()));
}

void BatchNorm1d::check_input(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3)
    throw std::invalid_argument("BatchNorm1d: expected 2D (N, C) or 3D (N, C, L) input, got " +
                                std::to_string(x.dim()) + "D input of shape " + shape_str(x.shape()));
  check_features(x);
}

void BatchNorm2d::check_input(const Tensor& x) const {
  if (x.dim() != 4)
    throw std::invalid_argument("BatchNorm2d: expected 4D (N, C, H, W) input, got " + std::to_string(x.dim()) +
                                "D input of shape " + shape_str(x.shape()));
  check_features(x);
}

functional::RunningStats BatchNormBase::running_stats() const {
  return {running_mean, running_var, num_batches_tracked, options.momentum, options.unbiased_running_var,
          &never_updated_reported_};
}

Tensor BatchNormBase::forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument(type_name() + ": the input is undefined");
  check_input(x);
  check_dtype(x);
  // options (a public field) are checked there, once
  return functional::batch_norm(x, weight, bias, running_stats(), is_training() || !options.track_running_stats,
                                options.eps, type_name());
}

Tensor BatchNormBase::forward_relu(const Tensor& x, std::optional<std::pair<double, double>> clip) {
  if (!x.defined()) throw std::invalid_argument(type_name() + ": the input is undefined");
  check_input(x);
  check_dtype(x);
  return functional::batch_norm_relu(x, weight, bias, running_stats(), is_training() || !options.track_running_stats,
                                     options.eps, type_name(), clip);
}

void BatchNormBase::check_dtype(const Tensor& x) const {
  check_input_dtype(x, running_mean.defined() ? running_mean : weight);  // the state follows Module::to
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << options.eps << ", momentum=";
  if (options.momentum)
    os << *options.momentum;
  else
    os << "None";
  os << ", affine=" << (options.affine ? "True" : "False")
     << ", track_running_stats=" << (options.track_running_stats ? "True" : "False");
  return os.str();
}

}  // namespace tapegrad::layers
