#include <tapegrad/layers/channel_norm.h>

#include <cstdio>

namespace tapegrad::layers {

void ChannelNormBase::register_norm_state(std::int64_t c, Dtype dtype, bool affine, bool track_running_stats) {
  if (affine) {
    weight = register_parameter("weight", Tensor::ones({c}, dtype));
    bias = register_parameter("bias", Tensor::zeros({c}, dtype));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", Tensor::zeros({c}, dtype));
    running_var = register_buffer("running_var", Tensor::ones({c}, dtype));
    num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, Dtype::Int64));
  }
}

void ChannelNormBase::share_norm_state(const ChannelNormBase& src) {
  if (src.weight.defined()) weight = register_parameter("weight", src.weight);
  if (src.bias.defined()) bias = register_parameter("bias", src.bias);
  if (src.running_mean.defined()) running_mean = register_buffer("running_mean", src.running_mean);
  if (src.running_var.defined()) running_var = register_buffer("running_var", src.running_var);
  if (src.num_batches_tracked.defined()) num_batches_tracked = register_buffer("num_batches_tracked", src.num_batches_tracked);
}

std::string ChannelNormBase::check_state_value(const std::string& name, const Tensor& value) const {
  if (std::string why = Module::check_state_value(name, value); !why.empty()) return why;
  if (!value.defined()) return "";
  const Tensor& c = value;
  if (name == "num_batches_tracked" && c.dtype() == Dtype::Int64) {
    const std::int64_t* p = c.data<std::int64_t>();
    for (std::int64_t i = 0; i < c.numel(); ++i)
      if (p[i] < 0) return "expected a batch count >= 0, got " + std::to_string(p[i]);
  }
  if (name == "running_var" && is_floating(c.dtype())) {
    const std::vector<double> v = c.to_vector();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] < 0) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.9g", v[i]);
        return "expected values >= 0 (a variance), got " + std::string(buf) + " at index " + std::to_string(i);
      }
  }
  return "";
}

void ChannelNormBase::upgrade_state_dict(const std::string& prefix, const StateDict& incoming, StateDict& added,
                                         std::vector<std::string>& filled) const {
  if (!num_batches_tracked.defined()) return;
  const std::string key = prefix + "num_batches_tracked";
  if (incoming.contains(key) || !incoming.contains(prefix + "running_mean") || !incoming.contains(prefix + "running_var"))
    return;
  added.insert(key, Tensor::zeros(num_batches_tracked.shape(), num_batches_tracked.dtype()));
  filled.push_back(key + " = 0 (absent from the state dict, which has " + prefix + "running_mean and " + prefix +
                   "running_var: a checkpoint from before PyTorch 0.4.1)");
}

void ChannelNormBase::reset_running_stats() {
  if (!running_mean.defined()) return;
  running_mean.fill_(0.0);
  running_var.fill_(1.0);
  num_batches_tracked.fill_(0.0);
}

}  // namespace tapegrad::layers
