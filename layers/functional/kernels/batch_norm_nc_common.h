#pragma once
// Internal, for the variant files of batch norm over (N, C) only (cpu/batch_norm_nc_forward.cpp,
// cpu/batch_norm_nc_backward.cpp, compiled once per ISA level): the loads and stores of a
// vector or a scalar, the fused activation and its mask, the walk over channel chunks and the
// cache-residency test they share. Everything sits in an anonymous namespace inside
// ...::TAPEGRAD_ISA_NS, so each translation unit has its own copy at its own level.
#include <tapegrad/layers/functional/kernels/batch_norm_nc.h>

#include <algorithm>
#include <type_traits>

#include <tapegrad/layers/functional/kernels/moments.h>
#include <tapegrad/layers/functional/kernels/simd.h>
#include <tapegrad/layers/functional/kernels/thresholds.h>

namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS {
namespace {

using kernels::kLanes;
using kernels::merge_moments;
using kernels::Vec;
using Partial = kernels::PartialMoments;

// Rows per statistics block (kernels/thresholds.h): a block stays in L1 for the statistics'
// second pass; the T-precision sums run over one block's rows at a time.
using thresholds::bn_rows_block_rows;

// V is a vector of T or T itself (the channels past the last whole vector).
template <class V, class T>
constexpr std::int64_t lanes_of() {
  return static_cast<std::int64_t>(sizeof(V) / sizeof(T));
}
template <class V, class T>
inline V ld(const T* p) {
  if constexpr (std::is_same_v<V, T>)
    return *p;
  else
    return kernels::load(p);
}
template <class V, class T>
inline void st(T* p, V v) {
  if constexpr (std::is_same_v<V, T>)
    *p = v;
  else
    kernels::store(p, v);
}

// The activation fused after the normalisation (BnAct in batch_norm_nc.h) and its mask on dy,
// element-wise selects with the core ops' comparisons: relu's `v <= 0 ? 0 : v` (NaN
// passes), then clamp's `r > hi ? hi : r`; the backward keeps dy where relu's
// `m <= 0 ? 0 : dy` or relu_clamp's `0 < m <= hi` lets it through (m: the normalised value,
// the activation's input).
template <int Act, class V, class T>
inline V activate(V v, T hi) {
  if constexpr (Act == kBnActNone) {
    return v;
  } else {
    const V r = v <= V{} ? V{} : v;
    if constexpr (Act == kBnActRelu) {
      return r;
    } else {
      const V h = V{} + hi;
      return r > h ? h : r;
    }
  }
}
template <int Act, class V, class T>
inline V masked(V g, const T* m, T hi) {
  if constexpr (Act == kBnActNone) {
    return g;
  } else {
    const V mv = ld<V>(m);
    if constexpr (Act == kBnActRelu) {
      return mv <= V{} ? V{} : g;
    } else {
      const V h = V{} + hi;
      return (mv > V{}) & (mv <= h) ? g : V{};
    }
  }
}

// Calls f.template operator()<V, NV>(c0) over the channels: chunks of 4 vectors, one chunk
// of the remaining 1-3 vectors, then each remaining channel as a scalar.
template <class T, class F>
void for_chunks(std::int64_t C, F&& f) {
  constexpr std::int64_t L = kLanes<T>;
  std::int64_t c0 = 0;
  for (; c0 + 4 * L <= C; c0 += 4 * L) f.template operator()<Vec<T>, 4>(c0);
  switch ((C - c0) / L) {
    case 3: f.template operator()<Vec<T>, 3>(c0); break;
    case 2: f.template operator()<Vec<T>, 2>(c0); break;
    case 1: f.template operator()<Vec<T>, 1>(c0); break;
    default: break;
  }
  c0 += (C - c0) / L * L;
  for (; c0 < C; ++c0) f.template operator()<T, 1>(c0);
}

// Up to kBnRowsCachedBytes an operand is taken to be cache-resident (the sizes of MLP
// training): a kernel then walks a chunk of channels, held in registers, down the rows.
// Larger operands stream from memory row by row, the order the hardware prefetcher
// follows best (a chunk at a time would read each row in four strided pieces).
template <class T>
bool cached(std::int64_t N, std::int64_t C) {
  return thresholds::bn_rows_cached<T>(N, C);
}

}  // namespace
}  // namespace tapegrad::layers::functional::kernels::TAPEGRAD_ISA_NS
