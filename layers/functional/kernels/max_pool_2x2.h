#pragma once
// Internal: the common 2×2, stride 2 max pool (every window inside the input, an even width),
// compiled once per ISA level (cpu/max_pool_2x2.cpp; core/kernels/isa_dispatch.h): its selects
// vectorise, and with AVX-512 masks they run several times faster than with SSE.
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels {

/// The 2×2 max-pool kernel (cpu/max_pool_2x2.cpp, once per level).
template <class T>
struct MaxPool2x2Kernels {
  /// Planes [b, e) of x (H×W each, W even, 2·OH <= H, OW = W/2): y and idx (OH·OW per plane)
  /// get each window's maximum and its flat index in the plane, PyTorch's rule (strictly
  /// greater, or NaN, replaces the running maximum; windows scanned in row-major order).
  void (*planes)(const T* x, T* y, std::int64_t* idx, std::int64_t b, std::int64_t e, std::int64_t H, std::int64_t W,
                 std::int64_t OH, std::int64_t OW);
};
TAPEGRAD_DECLARE_KERNELS(MaxPool2x2Kernels, max_pool_2x2)

}  // namespace tapegrad::layers::functional::kernels
