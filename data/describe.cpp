#include <tapegrad/data/describe.h>

#include <stdexcept>

namespace tapegrad::data {

std::string tuple_str(const Shape& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

std::string describe_tensor(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + " " + tuple_str(t.shape()) : "an undefined tensor";
}

void check_float_image(const char* who, const Tensor& image) {
  if (!image.defined() || image.dtype() != Dtype::Float32 || image.dim() != 3)
    throw std::invalid_argument(std::string(who) + ": expected a float32 image (C, H, W), got " + describe_tensor(image));
}

}  // namespace tapegrad::data
