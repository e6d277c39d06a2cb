// The 2×2, stride 2 max pool; see max_pool_2x2.h. Compiled once per ISA level; registers max_pool_2x2.
#include <tapegrad/layers/functional/kernels/max_pool_2x2.h>

#include <tapegrad/layers/functional/kernels/simd.h>

namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {

// "v replaces the running maximum m": strictly greater, or NaN (PyTorch's max-pool rule).
template <class T>
inline bool replaces(T v, T m) {
  return v > m || v != v;
}

struct PairValTag {};
struct PairIdxTag {};
struct ColValTag {};
struct ColIdxTag {};

}  // namespace

// Output rows are short (14 or 7 in the reference CNN), so both passes run over whole planes
// as contiguous loops (they vectorise, with selects instead of branches that random data
// mispredicts):
//   1. each horizontal pair (x[2t], x[2t+1]) of the plane -> its maximum and which one;
//   2. pair t combined with the pair below it, t + W/2, for every t (the rows between the
//      windows' top rows are computed and unused), then the windows' rows copied out.
template <class T>
void max_pool_2x2_planes(const T* x, T* y, std::int64_t* idx, std::int64_t b, std::int64_t e, std::int64_t H,
                         std::int64_t W, std::int64_t OH, std::int64_t OW) {
  const std::int64_t HW = H * W, P = HW / 2, half = W / 2, L = OH * OW;
  const std::int64_t span = (2 * OH - 1) * half;  // pairs t whose combination is needed
  T* __restrict hvp = kernels::scratch<PairValTag, T>(static_cast<std::size_t>(P));
  T* __restrict cvp = kernels::scratch<ColValTag, T>(static_cast<std::size_t>(span));
  std::int64_t* __restrict hkp = kernels::scratch<PairIdxTag, std::int64_t>(static_cast<std::size_t>(P));
  std::int64_t* __restrict ckp = kernels::scratch<ColIdxTag, std::int64_t>(static_cast<std::size_t>(span));
  for (std::int64_t pl = b; pl < e; ++pl) {
    const T* __restrict xp = x + pl * HW;
    for (std::int64_t t = 0; t < P; ++t) {
      const T v0 = xp[2 * t], v1 = xp[2 * t + 1];
      const bool r = replaces(v1, v0);
      hvp[t] = r ? v1 : v0;
      hkp[t] = 2 * t + (r ? 1 : 0);
    }
    for (std::int64_t t = 0; t < span; ++t) {
      const T top = hvp[t], bot = hvp[t + half];
      const bool r = replaces(bot, top);
      cvp[t] = r ? bot : top;
      ckp[t] = r ? hkp[t + half] : hkp[t];
    }
    for (std::int64_t i = 0; i < OH; ++i) {
      __builtin_memcpy(y + pl * L + i * OW, cvp + 2 * i * half, static_cast<std::size_t>(OW) * sizeof(T));
      __builtin_memcpy(idx + pl * L + i * OW, ckp + 2 * i * half, static_cast<std::size_t>(OW) * sizeof(std::int64_t));
    }
  }
}

TAPEGRAD_REGISTER_KERNELS(MaxPool2x2Kernels, max_pool_2x2, .planes = &max_pool_2x2_planes<T>)

}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
