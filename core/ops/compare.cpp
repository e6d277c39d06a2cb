// Element-wise comparisons: no backward (the output never requires grad).
#include <tapegrad/core/ops/compare.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include <tapegrad/core/ops/kernels.h>

namespace tapegrad {
namespace {

void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": the input tensor is undefined");
}

// 1/0 in T from the comparison Cmp (std::equal_to<> ...), applied as IEEE does (NaN: false,
// and for ne true, since std::not_equal_to is !(a == b)).
template <class Cmp>
Tensor compare(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op);
  check_defined(b, op);
  kernels::check_same_dtype(a, b, op);
  if (a.dtype() == Dtype::Int64) {
    // int64 0/1, then the default float dtype (a copy; nothing is recorded for int64)
    return kernels::broadcast_binary<std::int64_t>(a, b, op, [](std::int64_t x, std::int64_t y) {
             return static_cast<std::int64_t>(Cmp{}(x, y));
           }).to(Dtype::Float32);
  }
  return TAPEGRAD_DISPATCH_FLOAT(a.dtype(), op, [&] {
    return kernels::broadcast_binary<scalar_t>(a, b, op, [](scalar_t x, scalar_t y) {
      return Cmp{}(x, y) ? scalar_t(1) : scalar_t(0);
    });
  });
}

template <class Cmp>
Tensor compare(const Tensor& a, double s, const char* op) {
  check_defined(a, op);
  if (a.dtype() == Dtype::Int64) {
    Tensor out = Tensor::empty(a.shape(), Dtype::Float32);
    const std::int64_t* p = a.data<std::int64_t>();
    float* q = out.data<float>();
    for (std::int64_t i = 0, n = a.numel(); i < n; ++i) q[i] = Cmp{}(static_cast<double>(p[i]), s) ? 1.0f : 0.0f;
    return out;
  }
  return TAPEGRAD_DISPATCH_FLOAT(a.dtype(), op, [&] {
    const auto v = static_cast<scalar_t>(s);  // the scalar in the tensor's dtype, as PyTorch
    return kernels::map_unary<scalar_t>(a, [v](scalar_t x) { return Cmp{}(x, v) ? scalar_t(1) : scalar_t(0); });
  });
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare<std::equal_to<>>(a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare<std::not_equal_to<>>(a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare<std::less<>>(a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare<std::less_equal<>>(a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare<std::greater<>>(a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare<std::greater_equal<>>(a, b, "ge"); }

Tensor eq(const Tensor& a, double s) { return compare<std::equal_to<>>(a, s, "eq"); }
Tensor ne(const Tensor& a, double s) { return compare<std::not_equal_to<>>(a, s, "ne"); }
Tensor lt(const Tensor& a, double s) { return compare<std::less<>>(a, s, "lt"); }
Tensor le(const Tensor& a, double s) { return compare<std::less_equal<>>(a, s, "le"); }
Tensor gt(const Tensor& a, double s) { return compare<std::greater<>>(a, s, "gt"); }
Tensor ge(const Tensor& a, double s) { return compare<std::greater_equal<>>(a, s, "ge"); }

}  // namespace tapegrad
