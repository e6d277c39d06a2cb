#include <tapegrad/layers/conv.h>

#include <cmath>
#include <stdexcept>

#include <tapegrad/layers/init.h>

namespace tapegrad::layers {

namespace {
void require(bool ok, const std::string& what, const std::string& got) {
  if (!ok) throw std::invalid_argument("Conv2d: expected " + what + ", got " + got);
}
}  // namespace

Conv2d::Conv2d(const Conv2dOptions& o, Generator& gen)
    : Conv2d(o.in_channels(), o.out_channels(), o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.groups(),
             o.bias(), o.dtype(), gen) {}

Conv2d::Conv2d(std::int64_t in, std::int64_t out, Size2 k, Size2 s, Size2 p, Size2 d, std::int64_t g, bool with_bias,
               Dtype dtype, Generator& gen)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), dilation(d), groups(g) {
  require(in >= 1 && out >= 1, "in_channels >= 1 and out_channels >= 1",
          "in_channels=" + std::to_string(in) + ", out_channels=" + std::to_string(out));
  functional::check_window_args("Conv2d", {k, s, p, d}, functional::PaddingLimit::NonNegative);
  require(g >= 1, "groups >= 1", std::to_string(g));
  require(in % g == 0, "in_channels divisible by groups=" + std::to_string(g), "in_channels=" + std::to_string(in));
  require(out % g == 0, "out_channels divisible by groups=" + std::to_string(g), "out_channels=" + std::to_string(out));
  Tensor w = Tensor::empty({out, in / g, k.h, k.w}, dtype);
  init::kaiming_uniform_(w, std::sqrt(5.0), gen);
  weight = register_parameter("weight", w);
  if (with_bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in / g * k.h * k.w));
    Tensor b = Tensor::empty({out}, dtype);
    init::uniform_(b, -bound, bound, gen);
    bias = register_parameter("bias", b);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  if (x.defined() && x.dim() == 4 && x.size(1) != in_channels)
    throw std::invalid_argument("Conv2d: expected input with " + std::to_string(in_channels) + " channels, got " +
                                std::to_string(x.size(1)) + " channels in input of shape " + shape_str(x.shape()));
  return functional::conv2d(x, weight, bias, stride, padding, dilation, groups);
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) + ", kernel_size=" +
                  kernel_size.str() + ", stride=" + stride.str();
  if (!(padding == Size2(0))) s += ", padding=" + padding.str();
  if (!(dilation == Size2(1))) s += ", dilation=" + dilation.str();
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

}  // namespace tapegrad::layers
