#pragma once
// Internal: the common 2×2, stride 2 max pool (every window inside the input, an even width),
// compiled once per ISA level (max_pool_2x2.cpp; core/kernels/isa_dispatch.h): its selects
// vectorise, and with AVX-512 masks they run several times faster than with SSE.
#include <cstdint>

#include <tapegrad/core/kernels/isa_dispatch.h>

namespace tapegrad::layers::functional::kernels {

/// Planes [b, e) of x (H×W each, W even, 2·OH <= H, OW = W/2): y and idx (OH·OW per plane)
/// get each window's maximum and its flat index in the plane, PyTorch's rule (strictly
/// greater, or NaN, replaces the running maximum; windows scanned in row-major order).
template <class T>
void max_pool_2x2_planes(const T* x, T* y, std::int64_t* idx, std::int64_t b, std::int64_t e, std::int64_t H,
                         std::int64_t W, std::int64_t OH, std::int64_t OW);

// The per-ISA variants; the function above calls the one isa() picks (pool_dispatch.cpp).
#define TAPEGRAD_MAX_POOL_2X2_VARIANT_DECLS(ns)                                                                \
  namespace ns {                                                                                               \
  template <class T>                                                                                           \
  void max_pool_2x2_planes(const T* x, T* y, std::int64_t* idx, std::int64_t b, std::int64_t e, std::int64_t H, \
                           std::int64_t W, std::int64_t OH, std::int64_t OW);                                  \
  }
TAPEGRAD_ISA_FOR_EACH_VARIANT(TAPEGRAD_MAX_POOL_2X2_VARIANT_DECLS)

}  // namespace tapegrad::layers::functional::kernels
