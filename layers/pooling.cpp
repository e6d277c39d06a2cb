#include <tapegrad/layers/pooling.h>

#include <stdexcept>

namespace tapegrad::layers {

MaxPool2d::MaxPool2d(const MaxPool2dOptions& o)
    : MaxPool2d(o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode()) {}

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p, Size2 d, bool ceil)
    : kernel_size(k), stride(s.value_or(k)), padding(p), dilation(d), ceil_mode(ceil) {
  functional::check_window_args("MaxPool2d", {kernel_size, stride, padding, dilation}, functional::PaddingLimit::HalfKernel);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return functional::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() + ", padding=" + padding.str() +
         ", dilation=" + dilation.str() + ", ceil_mode=" + (ceil_mode ? "True" : "False");
}

AvgPool2d::AvgPool2d(const AvgPool2dOptions& o)
    : AvgPool2d(o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad()) {}

AvgPool2d::AvgPool2d(Size2 k, std::optional<Size2> s, Size2 p, bool ceil, bool include_pad)
    : kernel_size(k), stride(s.value_or(k)), padding(p), ceil_mode(ceil), count_include_pad(include_pad) {
  functional::check_window_args("AvgPool2d", {kernel_size, stride, padding, 1}, functional::PaddingLimit::HalfKernel);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return functional::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() + ", padding=" + padding.str() +
         ", ceil_mode=" + (ceil_mode ? "True" : "False") +
         ", count_include_pad=" + (count_include_pad ? "True" : "False");
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 out) : output_size(out) {
  if (out.h < 1 || out.w < 1)
    throw std::invalid_argument("AdaptiveAvgPool2d: expected output_size >= 1, got " + out.str());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, output_size); }

}  // namespace tapegrad::layers
