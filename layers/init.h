#pragma once
// Parameter initialisation, PyTorch's conventions (torch.nn.init).
#include <tapegrad/core/random.h>
#include <tapegrad/core/tensor.h>

namespace tapegrad::layers::init {

/// Fills t with U(lo, hi). Never recorded.
void uniform_(Tensor& t, double lo, double hi, Generator& gen = default_generator());
/// Kaiming/He uniform for leaky-ReLU slope a, fan_in mode: bound = gain·sqrt(3/fan_in)
/// with gain = sqrt(2/(1+a²)) (He et al. 2015). PyTorch's Linear uses a = sqrt(5),
/// giving bound = 1/sqrt(fan_in). t is (out_features, in_features).
void kaiming_uniform_(Tensor& t, double a, Generator& gen = default_generator());

}  // namespace tapegrad::layers::init
