#include <tapegrad/layers/linear.h>

#include <cmath>

#include <tapegrad/core/ops.h>
#include <tapegrad/layers/init.h>

namespace tapegrad::layers {

Linear::Linear(const LinearOptions& o, Generator& gen)
    : Linear(o.in_features(), o.out_features(), o.bias(), o.dtype(), gen) {}

Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias, Dtype dtype, Generator& gen)
    : in_features(in), out_features(out) {
  if (in < 0 || out < 0)
    throw std::invalid_argument("Linear: expected non-negative sizes, got in_features=" + std::to_string(in) +
                                ", out_features=" + std::to_string(out));
  Tensor w = Tensor::empty({out, in}, dtype);
  init::kaiming_uniform_(w, std::sqrt(5.0), gen);
  weight = register_parameter("weight", w);
  if (with_bias) {
    const double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
    Tensor b = Tensor::empty({out}, dtype);
    init::uniform_(b, -bound, bound, gen);
    bias = register_parameter("bias", b);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

}  // namespace tapegrad::layers
