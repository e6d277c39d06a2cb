// The dtype checks every op starts with (declared in kernels.h).
#include <tapegrad/core/ops/kernels.h>

#include <stdexcept>
#include <string>

namespace tapegrad::kernels {

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": dtype mismatch, " + dtype_name(a.dtype()) + " " +
                                shape_str(a.shape()) + " vs " + dtype_name(b.dtype()) + " " + shape_str(b.shape()) +
                                " (convert one with .to())");
}

void check_floating(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
  if (!is_floating(t.dtype()))
    throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 tensor, got " +
                                dtype_name(t.dtype()));
}

void check_floating_pair(const Tensor& a, const Tensor& b, const char* op) {
  check_floating(a, op);
  check_floating(b, op);
  check_same_dtype(a, b, op);
}

}  // namespace tapegrad::kernels
