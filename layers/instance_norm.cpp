#include <tapegrad/layers/instance_norm.h>

#include <cmath>
#include <string>

#include <sstream>
#include <stdexcept>

#include <tapegrad/core/ops/shape_ops.h>
#include <tapegrad/layers/functional/instance_norm.h>

namespace tapegrad::layers {

namespace {
// At construction; options is a public field, so every forward's functional::instance_norm
// checks it again, once.
void check_options(const std::string& who, const InstanceNormOptions& opts) {
  if (!(opts.eps >= 0 && std::isfinite(opts.eps)))
    throw std::invalid_argument(who + ": eps must be >= 0 and finite, got " + std::to_string(opts.eps));
  functional::check_momentum(who, opts.momentum);
}
}  // namespace

InstanceNormBase::InstanceNormBase(std::int64_t c, InstanceNormOptions opts) : num_features(c), options(opts) {
  if (c <= 0) throw std::invalid_argument("InstanceNorm: num_features must be positive, got " + std::to_string(c));
  check_options("InstanceNorm", opts);
  register_norm_state(c, opts.dtype, opts.affine, opts.track_running_stats);
}

Tensor InstanceNormBase::forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument(type_name() + ": the input is undefined");
  const std::int64_t rank = batched_rank();
  if (x.dim() != rank && x.dim() != rank - 1)
    throw std::invalid_argument(type_name() + ": expected " + shape_text() + " input, got " + std::to_string(x.dim()) +
                                "D input of shape " + shape_str(x.shape()));
  const bool unbatched = x.dim() == rank - 1;
  const std::int64_t c = unbatched ? x.size(0) : x.size(1);
  if (c != num_features)
    throw std::invalid_argument(type_name() + ": expected " + std::to_string(num_features) + " channels (dim " +
                                (unbatched ? "0" : "1") + "), got input of shape " + shape_str(x.shape()));
  // The module's dtype is that of its tensors (Module::to may have converted them).
  check_input_dtype(x, weight.defined() ? weight : running_mean);
  Tensor xb = x;
  if (unbatched) {
    Shape s = x.shape();
    s.insert(s.begin(), 1);
    xb = reshape(x, s);
  }
  const bool use_input_stats = is_training() || !options.track_running_stats;
  // options (a public field) are checked there, once; num_batches_tracked is never incremented (PyTorch)
  const functional::RunningStats running{running_mean, running_var, Tensor(), options.momentum, true};
  Tensor y = functional::instance_norm(xb, weight, bias, running, use_input_stats, options.eps, type_name());
  return unbatched ? reshape(y, x.shape()) : y;
}

std::string InstanceNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << options.eps << ", momentum=" << options.momentum
     << ", affine=" << (options.affine ? "True" : "False")
     << ", track_running_stats=" << (options.track_running_stats ? "True" : "False");
  return os.str();
}

}  // namespace tapegrad::layers
