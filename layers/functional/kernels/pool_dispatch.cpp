// The entry point of the 2×2 max-pool kernel (max_pool_2x2.h): calls the variant for the
// process's ISA level, looked up once (core/kernels/isa_dispatch.h).
#include <tapegrad/layers/functional/kernels/max_pool_2x2.h>

namespace tapegrad::layers::functional::kernels {

template <class T>
void max_pool_2x2_planes(const T* x, T* y, std::int64_t* idx, std::int64_t b, std::int64_t e, std::int64_t H,
                         std::int64_t W, std::int64_t OH, std::int64_t OW) {
  static const auto f = TAPEGRAD_ISA_SELECT(max_pool_2x2_planes<T>);
  f(x, y, idx, b, e, H, W, OH, OW);
}

template void max_pool_2x2_planes<float>(const float*, float*, std::int64_t*, std::int64_t, std::int64_t, std::int64_t,
                                         std::int64_t, std::int64_t, std::int64_t);
template void max_pool_2x2_planes<double>(const double*, double*, std::int64_t*, std::int64_t, std::int64_t,
                                          std::int64_t, std::int64_t, std::int64_t, std::int64_t);

}  // namespace tapegrad::layers::functional::kernels
