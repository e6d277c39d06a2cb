#include <tapegrad/core/dtype.h>

#include <stdexcept>

namespace tapegrad {

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
    case Dtype::Int64: return "int64";
  }
  return "unknown";
}

namespace detail {
void throw_not_floating(const char* op, Dtype d) {
  throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 tensor, got " + dtype_name(d));
}
}  // namespace detail
}  // namespace tapegrad
