#include <tapegrad/layers/channel_norm.h>

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

void ChannelNormBase::reset_running_stats() {
  if (!running_mean.defined()) return;
  running_mean.fill_(0.0);
  running_var.fill_(1.0);
  num_batches_tracked.fill_(0.0);
}

}  // namespace tapegrad::layers
