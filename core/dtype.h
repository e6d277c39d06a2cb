#pragma once
// Element types a Tensor can hold, chosen at run time.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tapegrad {

/// Element type of a Tensor. Float32 and Float64 are differentiable; Int64 holds
/// counters (num_batches_tracked), class indices and optimizer step counts.
enum class Dtype : std::uint8_t { Float32, Float64, Int64 };

/// Bytes per element: 4, 8, 8.
constexpr std::size_t dtype_size(Dtype d) { return d == Dtype::Float32 ? 4 : 8; }
/// "float32", "float64", "int64".
const char* dtype_name(Dtype d);
/// true for float32 and float64, false for int64.
inline bool is_floating(Dtype d) { return d != Dtype::Int64; }

/// The Dtype of a C++ element type: dtype_of<float>::value is Dtype::Float32 (float,
/// double and std::int64_t only).
template <class T> struct dtype_of;
/// \cond INTERNAL
/// (the specialisations behind dtype_of)
template <> struct dtype_of<float> { static constexpr Dtype value = Dtype::Float32; };
template <> struct dtype_of<double> { static constexpr Dtype value = Dtype::Float64; };
template <> struct dtype_of<std::int64_t> { static constexpr Dtype value = Dtype::Int64; };
/// \endcond

}  // namespace tapegrad

/// Calls `__VA_ARGS__` (a generic lambda body using the type alias `scalar_t`) with
/// scalar_t = float or double according to DTYPE; throws for int64.
#define TAPEGRAD_DISPATCH_FLOAT(DTYPE, OPNAME, ...)                                   \
  [&] {                                                                               \
    switch (DTYPE) {                                                                  \
      case ::tapegrad::Dtype::Float32: { using scalar_t = float; return __VA_ARGS__(); } \
      case ::tapegrad::Dtype::Float64: { using scalar_t = double; return __VA_ARGS__(); } \
      default: ::tapegrad::detail::throw_not_floating(OPNAME, DTYPE);                 \
    }                                                                                 \
  }()

namespace tapegrad::detail {
[[noreturn]] void throw_not_floating(const char* op, Dtype d);
}
