#include <tapegrad/core/dtype.h>

#include <stdexcept>

#include <tapegrad/core/enum_names.h>

namespace tapegrad {

namespace {
constexpr NamedValue<Dtype> kDtypeNames[] = {
    {Dtype::Float32, "float32"}, {Dtype::Float64, "float64"}, {Dtype::Int64, "int64"}};
}  // namespace

const char* dtype_name(Dtype d) { return name_of(kDtypeNames, d, "unknown"); }

namespace detail {
void throw_not_floating(const char* op, Dtype d) {
  throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 tensor, got " + dtype_name(d));
}
}  // namespace detail
}  // namespace tapegrad
